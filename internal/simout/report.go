package simout

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/prefixroute/prefixroute/internal/sim"
)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// fileName turns a variant name into a file name.
func fileName(s string) string { return unsafeName.ReplaceAllString(s, "_") }

// WriteReport writes a scenario's results under dir/<scenario>/: one CSV
// series per variant, summary.md (the tables), summary.json (the
// summaries), readiness.csv when a run has a readiness probe, and the PNG
// plots unless plots is false. It returns the files written.
func WriteReport(dir string, sc *sim.Scenario, runs []*sim.Result, plots bool) ([]string, error) {
	out := filepath.Join(dir, sc.Name)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var files []string
	sums := make([]Summary, len(runs))
	for i, res := range runs {
		sums[i] = Summarise(res)
		path := filepath.Join(out, fileName(res.Variant.Name)+".csv")
		f, err := os.Create(path)
		if err != nil {
			return files, err
		}
		err = WriteCSV(f, res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, err
		}
		files = append(files, path)
	}
	md, err := os.Create(filepath.Join(out, "summary.md"))
	if err != nil {
		return files, err
	}
	fmt.Fprintf(md, "# %s\n\n%s\n\n", sc.Name, sc.Description)
	err = WriteMarkdown(md, sc, sums)
	if cerr := md.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return files, err
	}
	files = append(files, md.Name())
	js, err := json.MarshalIndent(sums, "", "  ")
	if err != nil {
		return files, err
	}
	if err := os.WriteFile(filepath.Join(out, "summary.json"), js, 0o644); err != nil {
		return files, err
	}
	files = append(files, filepath.Join(out, "summary.json"))
	for _, res := range runs {
		if res.Live == nil {
			continue
		}
		path := filepath.Join(out, fileName(res.Variant.Name)+"-routes.csv")
		f, err := os.Create(path)
		if err != nil {
			return files, err
		}
		err = WriteRoutesCSV(f, res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, err
		}
		files = append(files, path)
	}
	tail := filepath.Join(out, "tail.csv")
	tf, err := os.Create(tail)
	if err != nil {
		return files, err
	}
	err = WriteTailCSV(tf, runs)
	if cerr := tf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return files, err
	}
	files = append(files, tail)
	if slices.ContainsFunc(runs, func(r *sim.Result) bool { return r.Readiness != nil }) {
		path := filepath.Join(out, "readiness.csv")
		f, err := os.Create(path)
		if err != nil {
			return files, err
		}
		err = WriteReadinessCSV(f, runs)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, err
		}
		files = append(files, path)
	}
	if plots {
		pngs, err := WritePlots(out, sc, runs)
		files = append(files, pngs...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
