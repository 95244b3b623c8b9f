package simout

import (
	"encoding/json"
	"fmt"
	"io"
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
// series per variant, <variant>-requests.csv (every served request,
// WriteRequestsCSV), <variant>-routes.csv for a live run, summary.md (the
// tables), summary.json (the summaries), tail.csv, readiness.csv when a run
// has a readiness probe, and the PNG plots unless plots is false. It returns the files written.
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
		if err := writeFile(path, func(w io.Writer) error { return WriteCSV(w, res) }); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	md := filepath.Join(out, "summary.md")
	if err := writeFile(md, func(w io.Writer) error {
		fmt.Fprintf(w, "# %s\n\n%s\n\n", sc.Name, sc.Description)
		return WriteMarkdown(w, sc, sums)
	}); err != nil {
		return files, err
	}
	files = append(files, md)
	js, err := json.MarshalIndent(sums, "", "  ")
	if err != nil {
		return files, err
	}
	if err := os.WriteFile(filepath.Join(out, "summary.json"), js, 0o644); err != nil {
		return files, err
	}
	files = append(files, filepath.Join(out, "summary.json"))
	for _, res := range runs {
		path := filepath.Join(out, fileName(res.Variant.Name)+"-requests.csv")
		if err := writeFile(path, func(w io.Writer) error { return WriteRequestsCSV(w, res) }); err != nil {
			return files, err
		}
		files = append(files, path)
		if res.Live == nil {
			continue
		}
		path = filepath.Join(out, fileName(res.Variant.Name)+"-routes.csv")
		if err := writeFile(path, func(w io.Writer) error { return WriteRoutesCSV(w, res) }); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	tail := filepath.Join(out, "tail.csv")
	if err := writeFile(tail, func(w io.Writer) error { return WriteTailCSV(w, runs) }); err != nil {
		return files, err
	}
	files = append(files, tail)
	if slices.ContainsFunc(runs, func(r *sim.Result) bool { return r.Readiness != nil }) {
		path := filepath.Join(out, "readiness.csv")
		if err := writeFile(path, func(w io.Writer) error { return WriteReadinessCSV(w, runs) }); err != nil {
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

// writeFile creates path and writes it with write, closing it either way.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
