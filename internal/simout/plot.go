package simout

import (
	"github.com/prefixroute/prefixroute/internal/sim"

	"cmp"
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// ErrEmptyPlot: a plot would have no line to draw.
var ErrEmptyPlot = errors.New("plot without data")

// MinPlotPoints is the fewest points the longest line of a plot must have.
const MinPlotPoints = 2

// logTicks labels a log axis at 1, 2 and 5 times the powers of ten in its
// range (plot.LogTicks labels only the powers, which leaves a range within
// one decade with one label or none), and at both ends when even those give
// fewer than two labels. Safe for concurrent use.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	}
	var ticks []plot.Tick
	labels := 0
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * base
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
				labels++
			}
			ticks = append(ticks, t)
		}
	}
	if labels < 2 {
		ticks = append(ticks, plot.Tick{Value: lo, Label: strconv.FormatFloat(lo, 'g', 3, 64)},
			plot.Tick{Value: hi, Label: strconv.FormatFloat(hi, 'g', 3, 64)})
	}
	return ticks
}

// window is one plotting window of a run.
type window struct {
	t          float64 // window start, s
	ttftP99    float64 // ms
	hit        float64
	focusShare float64
	weight     float64 // focus deployment's weight share at the start
	prefilled  float64 // tokens per second
}

// windows aggregates the run into windows of res.Smooth.
func windows(res *sim.Result) []window {
	w := max(1, int(res.Smooth/time.Second))
	series := Series(res)
	f := focusIndex(res)
	ttft := make([][]float64, (len(series)+w-1)/w)
	for i := range res.Records {
		r := &res.Records[i]
		k := min(int(r.Arrival/time.Second)/w, len(ttft)-1)
		ttft[k] = append(ttft[k], float64(r.TTFT)/1e6)
	}
	var out []window
	for k := range ttft {
		secs := series[k*w : min((k+1)*w, len(series))]
		var p, h, pre uint64
		var n, nf float64
		for _, s := range secs {
			p, h, pre = p+s.Prompt, h+s.Hit, pre+s.Prefilled
			n += float64(s.Requests)
			nf += s.DepShare[f] * float64(s.Requests)
		}
		slices.Sort(ttft[k])
		win := window{t: float64(k * w), ttftP99: sim.Percentile(ttft[k], 0.99), weight: secs[0].Weights[f],
			prefilled: float64(pre) / float64(len(secs))}
		if p > 0 {
			win.hit = float64(h) / float64(p)
		}
		if n > 0 {
			win.focusShare = nf / n
		}
		out = append(out, win)
	}
	return out
}

// variantStyle gives variant i a colour and, past the palette, dashes.
func variantStyle(l *plotter.Line, i int) {
	palette := []color.Color{
		color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
		color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
		color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
		color.RGBA{23, 190, 207, 255}, color.RGBA{0, 0, 128, 255}, color.RGBA{255, 215, 0, 255},
	}
	l.Color = palette[i%len(palette)]
	l.Width = vg.Points(1.2)
	if i >= len(palette) {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	}
}

// linePlot draws one series per run, picked by y, with the weight changes
// as grey vertical lines. A plot where no series has two points (a line
// needs them) is an error wrapping ErrEmptyPlot: it would be written blank.
func linePlot(runs []*sim.Result, title, ylabel string, logY bool, y func(w window) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	lo, hi := 1e300, -1e300
	points := 0
	for i, res := range runs {
		var xys plotter.XYs
		for _, w := range windows(res) {
			v := y(w)
			if logY && v <= 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: w.t, Y: v})
			lo, hi = min(lo, v), max(hi, v)
		}
		if len(xys) == 0 {
			continue
		}
		points = max(points, len(xys))
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		variantStyle(l, i)
		p.Add(l)
		label := (&Summary{Variant: res.Variant.Name, Baseline: res.Variant.Baseline(), Picker: res.Variant.Picker}).Label()
		p.Legend.Add(label, l)
	}
	if points < MinPlotPoints {
		n, smooth := 0, time.Duration(0)
		if len(runs) > 0 {
			n, smooth = len(windows(runs[0])), runs[0].Smooth
		}
		return nil, fmt.Errorf("%w: %q has %d points per line, from %d windows of %v; run longer or set a shorter smooth",
			ErrEmptyPlot, title, points, n, smooth)
	}
	if len(runs) > 0 && hi >= lo {
		for i, c := range runs[0].Changes {
			if i == 0 {
				continue
			}
			x := c.At.Seconds()
			l, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
			if err != nil {
				return nil, err
			}
			l.Color = color.Gray{Y: 150}
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(l)
		}
	}
	return p, nil
}

// WritePlots draws the scenario's PNGs into dir and returns their paths:
// TTFT p99, hit ratio and prefilled tokens over time for every variant;
// the focus deployment's traffic share when there are several
// deployments; the per-instance traffic share when there is one; the
// readiness probe's deployment's prefill rate around the cutover when a
// run has a probe.
func WritePlots(dir string, sc *sim.Scenario, runs []*sim.Result) ([]string, error) {
	win := sc.Smooth.String()
	type spec struct {
		name, title, ylabel string
		logY                bool
		y                   func(w window) float64
	}
	specs := []spec{
		{"ttft-p99", sc.Name + ": TTFT p99 per " + win + " window", "TTFT p99 (ms, log)", true, func(w window) float64 { return w.ttftP99 }},
		{"hit-ratio", sc.Name + ": prefix-cache hit ratio (token-weighted) per " + win, "hit ratio", false, func(w window) float64 { return w.hit }},
		{"prefilled", sc.Name + ": prefilled (uncached) tokens per second", "tokens/s", false, func(w window) float64 { return w.prefilled }},
	}
	if len(sc.Deployments) > 1 {
		specs = append(specs, spec{"share", fmt.Sprintf("%s: traffic share of deployment %s per %s (black: weight share)", sc.Name, sc.Focus, win),
			"share of requests", false, func(w window) float64 { return w.focusShare }})
	}
	var paths []string
	for _, s := range specs {
		p, err := linePlot(runs, s.title, s.ylabel, s.logY, s.y)
		if err != nil {
			return paths, err
		}
		if s.name == "share" && len(runs) > 0 {
			var xys plotter.XYs
			for _, w := range windows(runs[0]) {
				xys = append(xys, plotter.XY{X: w.t, Y: w.weight})
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return paths, err
			}
			l.Color, l.Dashes = color.Black, []vg.Length{vg.Points(5), vg.Points(3)}
			p.Add(l)
		}
		path := filepath.Join(dir, sc.Name+"-"+s.name+".png")
		if err := p.Save(9*vg.Inch, 3.8*vg.Inch, path); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	if slices.ContainsFunc(runs, func(r *sim.Result) bool { return r.Readiness != nil }) {
		path := filepath.Join(dir, sc.Name+"-readiness.png")
		if err := readinessPlot(path, sc, runs); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	if len(sc.Deployments) == 1 && len(runs) > 0 {
		path := filepath.Join(dir, sc.Name+"-instance-share.png")
		if err := instancePlot(path, sc, runs); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// instancePlot draws, per variant, each instance's share of the requests,
// sorted from the busiest, as grouped bars.
func instancePlot(path string, sc *sim.Scenario, runs []*sim.Result) error {
	p := plot.New()
	p.Title.Text = sc.Name + ": share of requests per instance, busiest first (1/n is even)"
	p.Y.Label.Text = "share of requests"
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	n := len(runs[0].Instances)
	width := vg.Points(60 / float64(len(runs)))
	for i, res := range runs {
		vals := make(plotter.Values, n)
		total := 0.0
		for k, in := range res.Instances {
			vals[k] = float64(in.Requests)
			total += vals[k]
		}
		slices.SortFunc(vals, func(a, b float64) int { return cmp.Compare(b, a) })
		for k := range vals {
			vals[k] /= max(total, 1)
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		l := &plotter.Line{}
		variantStyle(l, i)
		bars.Color, bars.LineStyle.Width = l.Color, 0
		bars.Offset = vg.Length(float64(i)-float64(len(runs)-1)/2) * width
		p.Add(bars)
		label := (&Summary{Variant: res.Variant.Name, Baseline: res.Variant.Baseline(), Picker: res.Variant.Picker}).Label()
		p.Legend.Add(label, bars)
	}
	names := make([]string, n)
	for k := range names {
		names[k] = fmt.Sprintf("#%d", k+1)
	}
	p.NominalX(names...)
	even, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1 / float64(n)}, {X: float64(n) - 0.5, Y: 1 / float64(n)}})
	if err != nil {
		return err
	}
	even.Color, even.Dashes = color.Black, []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(even)
	return p.Save(9*vg.Inch, 3.8*vg.Inch, path)
}
