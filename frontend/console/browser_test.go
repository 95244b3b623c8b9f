package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// The browser test: real headless Chromium (Debian's chromium, which 'make
// test-deps' installs) driven through the DevTools protocol by chromedp,
// against a real daemon with reporters and a gateway. Screenshots of every
// page go to out/console/ at the repository root (git-ignored); with
// CONSOLE_DOCS=1 they are also copied to docs/console/ for the README.

// chromiumPath finds the browser, or skips the test loudly: under CI
// (CI set) a missing browser fails instead, since 'make test' installs it.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "NO BROWSER: chromium is not installed, so the console's browser test cannot run; install it with 'make test-deps' (apt-get install chromium)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium tab with its console errors collected.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string // http://127.0.0.1:port/ui/
	mu   sync.Mutex
	errs []string
}

// browserStarts is how many times newBrowser tries to start Chromium.
const browserStarts = 3

func newBrowser(t *testing.T, httpAddr string) *browser {
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 800))
	// The first call starts the browser for the life of ctx: no timeout.
	// Chromium sometimes exits at start on a loaded machine; each attempt
	// gets a context of its own (a second start on the same context makes
	// chromedp close a channel twice and panic).
	var (
		ctx         context.Context
		stop, stopA context.CancelFunc
	)
	for attempt := 1; ; attempt++ {
		actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
		c, cancel := chromedp.NewContext(actx)
		err := chromedp.Do(c)
		if err == nil {
			ctx, stop, stopA = c, cancel, cancelA
			break
		}
		cancel()
		cancelA()
		if attempt == browserStarts {
			t.Fatalf("Chromium (%s) did not start in %d attempts: %v", path, attempt, err)
		}
		t.Logf("Chromium (%s) did not start (attempt %d of %d): %v", path, attempt, browserStarts, err)
	}
	b := &browser{t: t, ctx: ctx, base: "http://" + httpAddr + "/ui/"}
	var collected sync.WaitGroup
	t.Cleanup(func() { stop(); stopA(); collected.Wait() })
	msgs := chromedp.Console(ctx)
	collected.Add(1)
	go func() {
		defer collected.Done()
		for m, err := range msgs {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				b.mu.Lock()
				b.errs = append(b.errs, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				b.mu.Unlock()
			}
		}
	}()
	b.run(chromedp.EmulateViewport(1280, 800))
	return b
}

// run runs actions, failing the test on an error.
func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, servertest.DefaultTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// evalJS evaluates a JavaScript expression in b's page.
func evalJS[T any](b *browser, js string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, servertest.DefaultTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js))
}

// must is evalJS failing the test on an error.
func must[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := evalJS[T](b, js)
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// open goes to the page at hash and waits for its first poll.
func (b *browser) open(hash string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base + hash))
	b.waitJS(`Number(document.body.dataset.polls || 0) >= 1`)
}

// waitJS polls a JavaScript condition until it is true.
func (b *browser) waitJS(cond string) {
	b.t.Helper()
	servertest.EventuallyOK(b.t, func() string {
		ok, err := evalJS[bool](b, `!!(`+cond+`)`)
		if err != nil {
			return err.Error()
		}
		if !ok {
			return "not yet: " + cond
		}
		return ""
	})
}

// polls is the number of refreshes the page has completed.
func (b *browser) polls() int {
	b.t.Helper()
	return must[int](b, `Number(document.body.dataset.polls || 0)`)
}

// screenshot saves the viewport as out/console/name.png, and in
// docs/console/ with CONSOLE_DOCS=1.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, servertest.DefaultTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	dirs := []string{filepath.Join("..", "..", "out", "console")}
	if os.Getenv("CONSOLE_DOCS") == "1" {
		dirs = append(dirs, filepath.Join("..", "..", "docs", "console"))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// noErrors fails the test if the page logged an error, a warning or an
// uncaught exception (a CSP violation is one).
func (b *browser) noErrors() { b.t.Helper(); b.noErrorsBut("") }

// noErrorsBut is noErrors for the messages that do not contain expected
// (every message when it is "").
func (b *browser) noErrorsBut(expected string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		if expected == "" || !strings.Contains(e, expected) {
			b.t.Errorf("browser: %s", e)
		}
	}
}

// TestConsoleInBrowser walks every page of the console against a live
// fleet: the pool and its instances, a weight change reaching the chart
// and the table, Pause on a running ramp, an explain of a cached prompt.
func TestConsoleInBrowser(t *testing.T) {
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	f := startFleet(t, servertest.Config(func(c *daemon.Config) { c.DecisionLog, c.DecisionLogRate = dlog, 1 }))
	f.run(f.sc.Conn)
	b := newBrowser(t, f.sc.HTTPAddr())
	defer b.noErrors()
	ctx := context.Background()

	// Pools: the pool with its five instances.
	b.open("#/")
	b.waitJS(`document.querySelector('tr[data-pool="chat"]') && document.querySelector('tr[data-pool="chat"]').textContent.includes("5")`)
	b.screenshot("pools")
	// A pool without instances shows its weights, or says why it has none,
	// never a bare "0".
	if _, err := f.sc.Admin.SetWeights(ctx, &pb.SetWeightsRequest{Pool: "idle", Weights: map[string]float64{"x": 3}, AllowNewPool: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sc.Admin.SetPolicy(ctx, &pb.SetPolicyRequest{Pool: "bare", Policy: &pb.Policy{DeltaMs: proto.Float64(30)}, AllowNewPool: true}); err != nil {
		t.Fatal(err)
	}
	b.open("#/pool/chat")
	b.open("#/")
	b.waitJS(`document.querySelector('tr[data-pool="idle"] td.deps') && document.querySelector('tr[data-pool="bare"] td.deps')`)
	if got := must[string](b, `document.querySelector('tr[data-pool="idle"] td.deps').textContent`); !strings.Contains(got, "x weight 3.00 (no instances)") {
		t.Errorf("pools page, pool with weights and no instances: %q", got)
	}
	if got := must[string](b, `document.querySelector('tr[data-pool="bare"] td.deps').textContent`); !strings.HasPrefix(got, "— no instances") {
		t.Errorf("pools page, pool without weights or instances: %q", got)
	}

	// Instances: exactly the five reporters, a-3 marked stale once it stops.
	f.held.Store(true)
	b.open("#/pool/chat/instances")
	b.waitJS(`[...document.querySelectorAll('tr[data-instance]')].map(r => r.dataset.instance).sort().join() === "a-1,a-2,a-3,b-1,b-2"`)
	b.waitJS(`document.querySelector('tr[data-instance="a-3"]').dataset.state === "stale"`)
	b.waitJS(`Number(document.querySelector('tr[data-instance="a-1"] td:last-child').textContent) > 0`) // picks/s
	// sorting by queue ms descending puts b-2 (12 ms) first; filtering by "b-" leaves b's two.
	b.run(chromedp.Click(`button[data-sort="queue_ms"]`), chromedp.Click(`button[data-sort="queue_ms"]`))
	b.waitJS(`document.querySelector('tbody tr').dataset.instance === "b-2"`)
	b.screenshot("instances")
	// The keyboard alone: Enter on a focused column header sorts by it.
	b.run(chromedp.Focus(`button[data-sort="picks"]`), chromedp.KeyEvent("\r"))
	b.waitJS(`document.querySelector('th[aria-sort="ascending"] button[data-sort="picks"]') && document.activeElement.dataset.sort === "picks"`)
	b.run(chromedp.SendKeys(`#filter`, "b-"))
	b.waitJS(`[...document.querySelectorAll('tr[data-instance]')].map(r => r.dataset.instance).sort().join() === "b-1,b-2"`)
	checkRolesAndCapacity(t, b, f.sc)

	// Cutover: a weight change shows in the chart (a marker of the new
	// version) and the table on the page's next poll or the one after: at
	// one poll a second, within 2 s.
	b.open("#/pool/chat")
	b.waitJS(`document.querySelector('#chart-share path[data-series="share a"]')`)
	resp, err := f.sc.Admin.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: fleetPool, Weights: map[string]float64{"a": 30, "b": 70}})
	if err != nil {
		t.Fatal(err)
	}
	before := b.polls()
	b.waitJS(fmt.Sprintf(`document.querySelector('#chart-share .marker[data-weights-version="%d"]') && document.querySelector('tr[data-deployment="b"]').dataset.weight === "70"`, resp.GetVersion()))
	if after := b.polls(); after > before+2 {
		t.Errorf("weight change shown after %d polls (1 s each); want at most 2", after-before)
	}
	// the chart's weight line of b is at 70 % at its right end
	bWeightY := must[float64](b, `(() => { const p = document.querySelector('#chart-share path[data-series="weight b"]').getAttribute("d").trim().split(/[ML]/).filter(Boolean).pop().split(" "); return Number(p[1]); })()`)
	bottomY := must[float64](b, `Number(document.querySelector('#chart-share .grid-line').getAttribute("y1"))`)         // the 0 % line
	topY := must[float64](b, `Number([...document.querySelectorAll('#chart-share .grid-line')][4].getAttribute("y1"))`) // the 100 % line
	if got := (bottomY - bWeightY) / (bottomY - topY); got < 0.69 || got > 0.71 {
		t.Errorf("weight line of b ends at %.3f of the axis; want 0.70", got)
	}
	b.screenshot("cutover")

	// Ramp: start one from the form, then Pause it; GetRamp says paused.
	b.open("#/pool/chat/ramp")
	b.run(chromedp.SetValue(`#ramp-target`, "a=0, b=100"), chromedp.SetValue(`#ramp-duration`, "20m"), chromedp.SetValue(`#ramp-interval`, "5m"),
		chromedp.Click(`#ramp-form button[type=submit]`))
	b.waitJS(`document.querySelector('#ramp').dataset.state === "running" && !document.querySelector('#ramp-pause').disabled`)
	b.screenshot("ramp")
	b.run(chromedp.Click(`#ramp-pause`))
	servertest.EventuallyOK(t, func() string {
		r, err := f.sc.Admin.GetRamp(ctx, &pb.GetRampRequest{Pool: fleetPool})
		if err != nil {
			return err.Error()
		}
		if s := r.GetRamp().GetState(); s != pb.RampState_RAMP_STATE_PAUSED {
			return "ramp is " + s.String() + ", want paused"
		}
		return ""
	})
	b.waitJS(`document.querySelector('#ramp').dataset.state === "paused" && !document.querySelector('#ramp-resume').disabled`)

	// Migration readiness of a → b.
	b.open("#/pool/chat/migration")
	b.waitJS(`document.querySelector('#verdict')`)
	b.screenshot("migration")
	// One unit, in words, as 'prefixctl migration': loads in % of the
	// prefill capacity, amounts in prefill tokens/s; no ms/s.
	if mig := must[string](b, `document.querySelector('#mig').textContent + " " + document.querySelector('#mig-bar').getAttribute("aria-label")`); strings.Contains(mig, "ms/s") ||
		strings.Contains(mig, "ms of prefill") || !strings.Contains(mig, "% of its prefill capacity") ||
		!regexp.MustCompile(`^\+\d+ prefill tokens/s in all: \d+ prefill tokens/s that move with a's traffic, \d+ prefill tokens/s recomputing prefixes only a holds$`).MatchString(
			must[string](b, `document.querySelector('#mig-extra').textContent`)) {
		t.Errorf("migration page wording: %q", mig)
	}

	// Explain: the largest P(d) bar of a prompt only a-1 holds is a's, and
	// the instance chosen is one of a's.
	b.open("#/pool/chat/explain")
	b.run(chromedp.SetValue(`#prompt`, explainPrompt), chromedp.Click(`#explain-go`))
	b.waitJS(`document.querySelector('#dep-bars .bar') || document.querySelector('#explain-msg').textContent`)
	if msg := must[string](b, `document.querySelector('#explain-msg').textContent`); msg != "" {
		t.Fatalf("explain: %s", msg)
	}
	largest := must[string](b, `[...document.querySelectorAll('#dep-bars .bar')].sort((x, y) => Number(y.dataset.probability) - Number(x.dataset.probability))[0].dataset.deployment`)
	if largest != "a" {
		t.Errorf("explain of the prompt a-1 holds: largest P(d) bar is %q, want a", largest)
	}
	chosen := must[string](b, `document.querySelector('#chosen').textContent`)
	if !strings.Contains(chosen, " (a) at ") {
		t.Errorf("explain chose %q, want an instance of a", chosen)
	}
	b.screenshot("explain")
	// ...and a recent pick from the decision log, shown without picking again.
	b.run(chromedp.Click(`#recent summary`))
	b.waitJS(`document.querySelector('#recent-list button[data-recent="0"]')`)
	b.run(chromedp.Click(`#recent-list button[data-recent="0"]`))
	b.waitJS(`document.querySelector('#explain-msg').textContent.startsWith("From the decision log") && document.querySelectorAll('#dep-bars .bar').length === 2`)

	if os.Getenv("CONSOLE_DOCS") == "1" {
		docsCutover(t, f, b)
	}

	// A phone-width view of the cutover page stays legible.
	b.run(chromedp.EmulateViewport(390, 844))
	b.open("#/pool/chat")
	b.waitJS(`document.querySelector('#chart-share path')`)
	b.screenshot("cutover-phone")
}

// docsCutover, for the README's screenshots (CONSOLE_DOCS=1), replaces the
// paused ramp by one that moves all traffic to b in six 10 s steps, waits
// for it to finish and shoots the cutover and pools pages again: the
// charts then show the share following the weight, step by step.
func docsCutover(t *testing.T, f *fleet, b *browser) {
	ctx := context.Background()
	if _, err := f.sc.Admin.AbortRamp(ctx, &pb.AbortRampRequest{Pool: fleetPool}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sc.Admin.StartRamp(ctx, &pb.StartRampRequest{AllowNewPool: true, Pool: fleetPool, Target: map[string]float64{"a": 0, "b": 100},
		Duration: durationpb.New(60 * time.Second), StepInterval: durationpb.New(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	b.open("#/pool/chat/ramp")
	b.waitJS(`document.querySelector('#ramp').dataset.state === "running" && document.querySelector('ol.timeline li[data-step="1"][aria-current]')`)
	b.screenshot("ramp")
	b.open("#/pool/chat")
	servertest.EventuallyWithin(t, 2*time.Minute, "docs ramp done", func() bool {
		r, err := f.sc.Admin.GetRamp(ctx, &pb.GetRampRequest{Pool: fleetPool})
		return err == nil && r.GetRamp().GetState() == pb.RampState_RAMP_STATE_DONE
	})
	b.run(chromedp.Click(`button[data-span="300"]`))
	b.waitJS(`document.querySelector('#chart-share .marker[data-label$="(done)"]')`)
	// a's traffic share falls to 0 within the chart's 10 s window after the last step
	b.waitJS(`(() => { const p = document.querySelector('#chart-share path[data-series="share a"]').getAttribute("d").trim().split(/[ML]/).filter(Boolean).pop().split(" ");
		return Math.abs(Number(p[1]) - Number(document.querySelector('#chart-share .grid-line').getAttribute("y1"))) < 0.5; })()`)
	b.screenshot("cutover")
	b.open("#/")
	b.screenshot("pools")
}

// TestConsoleSignIn: with a tokens file the page asks for a token, keeps
// it in the tab's session storage, sends it, and shows the pools.
func TestConsoleSignIn(t *testing.T) {
	tokens := writeTokens(t, map[string]string{"reader": "operator-read"})
	sc := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.TokensFile = tokens }))
	b := newBrowser(t, sc.HTTPAddr())
	b.run(chromedp.Navigate(b.base + "#/"))
	b.waitJS(`!document.querySelector('#login').hidden && document.activeElement.id === "token"`)
	b.run(chromedp.SendKeys(`#token`, "reader-token"), chromedp.Click(`#login button[type=submit]`))
	b.waitJS(`document.querySelector('#login').hidden && document.querySelector('#pools table')`)
	if got := must[string](b, `sessionStorage.getItem("prefixroute.console.token")`); got != "reader-token" {
		t.Errorf("session storage holds %q", got)
	}
	b.noErrorsBut("status of 401") // the polls before the token was given
}
