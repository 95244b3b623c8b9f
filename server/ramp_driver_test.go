package server

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// rampDriverServer is a Server on a new data dir with clock, logging JSON
// to logs, holding at most maxPools pools.
func rampDriverServer(t *testing.T, clock *testwait.Clock, logs *testwait.SyncBuffer, maxPools int) *Server {
	t.Helper()
	s, err := New(Options{DataDir: t.TempDir(), Logger: slog.New(slog.NewJSONHandler(logs, nil)), Now: clock.Now,
		Limits: state.Limits{MaxPools: maxPools}})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, "Server", s)
	return s
}

// TestRampAutoHoldLogsAPauseNotMade: when auto-hold must pause a ramp but
// the pause cannot even be prepared (store.UpdateRampEdit refuses it), the
// driver logs why instead of returning silently. The registry accepts
// pool names the store refuses (a zero-width space is no control
// character, but it is unprintable), which is how the refusal is provoked
// here: the ramp is handed to stepRamp directly.
func TestRampAutoHoldLogsAPauseNotMade(t *testing.T) {
	clock := testwait.NewClock()
	clock.Set(time.Unix(1_800_000_000, 0))
	var logs testwait.SyncBuffer
	s := rampDriverServer(t, clock, &logs, 0)
	const pool = "chat\u200b"
	if _, err := s.reg.Ensure(pool); err != nil {
		t.Fatal(err)
	}
	r := rollout.New(1, map[string]float64{"a": 1, "b": 0}, []rollout.Step{{Weights: map[string]float64{"a": 0, "b": 1}, After: time.Minute}},
		rollout.AutoHold{MinHeadroomPct: 20, From: "a", To: "b"}, clock.Now(), "test")
	if s.holdReason(pool, &r) == "" {
		t.Fatal("auto-hold would not pause: b has no instance, so its headroom cannot be estimated")
	}
	if s.stepRamp(pool, &r) {
		t.Fatal("stepRamp applied a step")
	}
	got := logs.Logged(t, "ramp auto-hold: cannot pause; retrying on the next tick")
	if len(got) != 1 {
		t.Fatalf("%d lines say the pause was not made, want 1; logs:\n%s", len(got), logs.String())
	}
	if e, _ := got[0]["error"].(string); !strings.Contains(e, "unprintable") || got[0]["reason"] == "" {
		t.Errorf("the line has error %q and reason %q; want the store's refusal of the name and the hold's reason", e, got[0]["reason"])
	}
}

// TestRampStepLogsAStepNotInForce: a step stored but not put in force here
// (install refused: the registry holds its pool limit, and the ramp's pool
// came into the store without it, as a mirrored pool does on a replica)
// is logged as such. A pause auto-hold makes goes through the same
// installRamp, whose failure used to be dropped there; it cannot fail
// there (auto-hold only pauses a pool the registry holds), so the step is
// where the line is provoked.
func TestRampStepLogsAStepNotInForce(t *testing.T) {
	clock := testwait.NewClock()
	clock.Set(time.Unix(1_800_000_000, 0))
	var logs testwait.SyncBuffer
	s := rampDriverServer(t, clock, &logs, 1)
	if _, err := s.reg.Ensure("full"); err != nil {
		t.Fatal(err)
	}
	e, err := store.StartRampEdit("chat", map[string]float64{"a": 1, "b": 0},
		[]rollout.Step{{Weights: map[string]float64{"a": 0, "b": 1}, After: time.Minute}}, rollout.AutoHold{}, true, 0, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Change("chat", e, "test"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if n := s.AdvanceRamps(); n != 1 {
		t.Fatalf("AdvanceRamps applied %d steps, want 1 (stored)", n)
	}
	got := logs.Logged(t, "ramp step stored but not in force")
	if len(got) != 1 {
		t.Fatalf("%d lines say the step is not in force, want 1; logs:\n%s", len(got), logs.String())
	}
	if e, _ := got[0]["error"].(string); !strings.Contains(e, "limit") {
		t.Errorf("the line has error %q, want the registry's pool limit", e)
	}
}

// TestRampStepTakesTheWritePath: a ramp step is a configuration write like
// an admin call's: stored with the ramp named as the audit log's caller,
// put in force, and marked on the console's history (install), all by
// write.
func TestRampStepTakesTheWritePath(t *testing.T) {
	clock := testwait.NewClock()
	clock.Set(time.Unix(1_800_000_000, 0))
	var logs testwait.SyncBuffer
	s := rampDriverServer(t, clock, &logs, 0)
	o, err := newObserver(noop.NewMeterProvider().Meter("test"), s.reg, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	s.obs = o
	if _, err := s.change(context.Background(), "chat", true, func() (store.Edit, error) {
		return store.StartRampEdit("chat", map[string]float64{"a": 1, "b": 0},
			[]rollout.Step{{Weights: map[string]float64{"a": 0, "b": 1}, After: time.Minute}}, rollout.AutoHold{}, true, 0, "alice")
	}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if n := s.AdvanceRamps(); n != 1 {
		t.Fatalf("AdvanceRamps applied %d steps, want 1; logs:\n%s", n, logs.String())
	}
	p, err := s.reg.Pool("chat")
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Config().Weights; w["a"] != 0 || w["b"] != 1 {
		t.Errorf("weights in force %v; want the step's a=0 b=1", w)
	}
	raw, err := os.ReadFile(filepath.Join(s.opts.DataDir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var last struct {
		Caller string
		Ramp   struct{ Event string }
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Caller != "ramp 1 step 1/1 (started by alice)" || last.Ramp.Event == "" {
		t.Errorf("the step's audit record: caller %q, ramp event %q; want the ramp's step as the caller", last.Caller, last.Ramp.Event)
	}
	h, ok := o.history("chat", clock.Now())
	if !ok || len(h.Markers) == 0 || h.Markers[len(h.Markers)-1].Label != "ramp 1 step 1/1 (done)" {
		t.Errorf("console markers %+v; want the step's last", h.Markers)
	}
}

// TestConfigWritesTakeOnePath: only write stores a configuration
// (applyEdit), puts one in force (install) and takes adminMu; the replica
// host installs what other replicas stored, under its own Locked. A
// handler or the ramp driver calling them directly would bypass the path.
func TestConfigWritesTakeOnePath(t *testing.T) {
	allowed := map[string][]string{
		"applyEdit":    {"write"},
		"install":      {"replicaHost.Install", "write"},
		"adminMu.Lock": {"replicaHost.Locked", "write"},
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			where := fn.Name.Name
			if fn.Recv != nil {
				if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok { // a value receiver: name it
					where = id.Name + "." + where
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				key := sel.Sel.Name
				if inner, ok := sel.X.(*ast.SelectorExpr); ok && key == "Lock" {
					key = inner.Sel.Name + ".Lock"
				}
				if _, ok := allowed[key]; ok {
					found[key] = append(found[key], where)
				}
				return true
			})
		}
	}
	for key, want := range allowed {
		slices.Sort(found[key])
		if !slices.Equal(found[key], want) {
			t.Errorf("%s used in %v; want only in %v", key, found[key], want)
		}
	}
}
