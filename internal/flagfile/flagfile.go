// Package flagfile sets a flag.FlagSet's flags from a YAML file: every
// flag is a top-level key of the same name, with a scalar value written as
// on the command line ("listen: 0.0.0.0:50051", "migration-window: 5m",
// "insecure: true"). Flags given on the command line win over the file.
// The key set is the flag set itself, so a flag added to the binary is a
// key at once, and an unknown key is an error naming it.
//
// Apply is safe for concurrent use on distinct flag sets.
package flagfile

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxBytes bounds a config file: far more than every flag needs, small
// enough that a wrong path (a log file, a device) fails fast.
const MaxBytes = 1 << 20

// Apply reads the YAML file at path and sets each flag of fs it names,
// except those set on the command line (fs.Parse has run) and those in
// skip (e.g. "config" itself). The first bad key is the error, with its
// line, and nothing is applied; a value its flag rejects is the error too,
// after the keys before it were applied (the caller exits on any error).
func Apply(fs *flag.FlagSet, path string, skip ...string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // opened for reading: nothing to lose
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return err
	}
	if len(b) > MaxBytes {
		return fmt.Errorf("%s: larger than %d bytes", path, MaxBytes)
	}
	values, err := parse(fs, path, b, skip)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, kv := range values {
		if set[kv.name] {
			continue // the command line wins
		}
		if err := fs.Set(kv.name, kv.value); err != nil {
			return fmt.Errorf("%s:%d: %s: %v", path, kv.line, kv.name, err)
		}
	}
	return nil
}

// keyValue is one key of the file.
type keyValue struct {
	name, value string
	line        int
}

// parse checks the file against fs and returns its keys in file order.
func parse(fs *flag.FlagSet, path string, b []byte, skip []string) ([]keyValue, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file sets nothing
		}
		return nil, fmt.Errorf("%s: not YAML: %v", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: more than one YAML document", path)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of flag names to values", path, root.Line)
	}
	seen := map[string]int{}
	var out []keyValue
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		name := k.Value
		switch {
		case k.Kind != yaml.ScalarNode:
			return nil, fmt.Errorf("%s:%d: a key must be a flag name", path, k.Line)
		case slices.Contains(skip, name):
			return nil, fmt.Errorf("%s:%d: key %q: only on the command line", path, k.Line, name)
		case fs.Lookup(name) == nil:
			return nil, fmt.Errorf("%s:%d: unknown key %q%s", path, k.Line, name, hint(fs, name))
		case seen[name] != 0:
			return nil, fmt.Errorf("%s:%d: key %q given twice (first on line %d)", path, k.Line, name, seen[name])
		case v.Kind != yaml.ScalarNode:
			return nil, fmt.Errorf("%s:%d: %s: want one value, as on the command line (a list is one comma-separated string)",
				path, v.Line, name)
		case v.Tag == "!!null":
			return nil, fmt.Errorf("%s:%d: %s: no value", path, v.Line, name)
		}
		seen[name] = k.Line
		out = append(out, keyValue{name: name, value: v.Value, line: v.Line})
	}
	return out, nil
}

// hint names the flag a misspelt key probably meant: the same with
// dashes for underscores, or without a leading "--".
func hint(fs *flag.FlagSet, name string) string {
	for _, try := range []string{strings.ReplaceAll(name, "_", "-"), strings.TrimLeft(name, "-")} {
		if try != name && fs.Lookup(try) != nil {
			return fmt.Sprintf(" (did you mean %q?)", try)
		}
	}
	return "; the keys are the flag names without \"--\" (see -help)"
}
