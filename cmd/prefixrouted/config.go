package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/prefixroute/prefixroute/internal/buildinfo"
	"github.com/prefixroute/prefixroute/internal/flagfile"
)

// parseFlags parses the command line into fs, then --config FILE (YAML,
// every other flag a key; the command line wins), and answers --version.
// done reports that the process should exit with code (after --version,
// -help or a bad flag or file).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	config := fs.String("config", "", "YAML `FILE` setting any other flag, by its name: 'data-dir: /var/lib/prefixroute' (flags on the command line win)")
	version := fs.Bool("version", false, "print the version and exit")
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "prefixrouted: unexpected argument %q (flags only; see -help)\n", fs.Arg(0))
		return 2, true
	}
	if *version {
		fmt.Fprintln(stdout, "prefixrouted", buildinfo.Read())
		return 0, true
	}
	if *config != "" {
		if err := flagfile.Apply(fs, *config, "config", "version"); err != nil {
			fmt.Fprintf(stderr, "prefixrouted: --config: %v\n", err)
			return 2, true
		}
	}
	return 0, false
}
