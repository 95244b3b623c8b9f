package gateway

import (
	"fmt"
	"strings"
)

// ParseModelPools reads a model → pool mapping. Entries are "model=pool",
// separated by commas or newlines (the flag form "m1=poolA,m2=poolA" and
// the file form, one entry a line, are the same syntax); spaces around
// names are ignored, and so are empty entries and lines starting with '#'.
// A model given twice, or an entry without '=' or with an empty side, is an
// error naming the entry. An empty s is an empty mapping.
func ParseModelPools(s string) (map[string]string, error) {
	m := map[string]string{}
	for lineNo, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, e := range strings.Split(line, ",") {
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			model, pool, ok := strings.Cut(e, "=")
			model, pool = strings.TrimSpace(model), strings.TrimSpace(pool)
			if !ok || model == "" || pool == "" {
				return nil, fmt.Errorf("model pools: line %d: %q is not model=pool", lineNo+1, e)
			}
			if old, dup := m[model]; dup {
				return nil, fmt.Errorf("model pools: line %d: model %q is mapped twice (to %q and %q)", lineNo+1, model, old, pool)
			}
			m[model] = pool
		}
	}
	return m, nil
}
