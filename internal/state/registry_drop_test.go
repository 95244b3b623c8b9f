package state

import (
	"slices"
	"testing"
	"time"
)

// TestDropIdle: a pool with neither instances nor configuration is dropped
// once it has been seen idle for longer than forget_after; configuration
// (in the pool or kept outside it) and an Ensure since it was seen idle
// keep it.
func TestDropIdle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	forget := DefaultConfig().Policy.ForgetAfter
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, r *Registry, p *Pool)
		kept    bool // keep says the pool is configured elsewhere
		dropped bool
	}{
		{"idle", func(*testing.T, *Registry, *Pool) {}, false, true},
		{"kept outside", func(*testing.T, *Registry, *Pool) {}, true, false},
		{"weights set", func(_ *testing.T, _ *Registry, p *Pool) {
			cfg := DefaultConfig()
			cfg.Weights, cfg.WeightsVersion = map[string]float64{"d": 1}, 1
			p.SetConfig(cfg)
		}, false, false},
		{"ensured since", func(t *testing.T, r *Registry, _ *Pool) {
			if _, err := r.Ensure("p"); err != nil {
				t.Fatal(err)
			}
		}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := NewRegistry(Limits{})
			p, err := r.Ensure("p")
			if err != nil {
				t.Fatal(err)
			}
			keep := func(string) bool { return c.kept }
			if got := r.DropIdle(t0, keep); len(got) != 0 {
				t.Fatalf("dropped %v at the first sweep", got)
			}
			c.prepare(t, r, p)
			if got := r.DropIdle(t0.Add(forget), keep); len(got) != 0 {
				t.Fatalf("dropped %v within forget_after", got)
			}
			got := r.DropIdle(t0.Add(forget+time.Second), keep)
			if slices.Equal(got, []string{"p"}) != c.dropped {
				t.Fatalf("dropped %v, want dropped=%v", got, c.dropped)
			}
			if _, err := r.Pool("p"); (err != nil) != c.dropped {
				t.Errorf("Pool after the sweep: %v", err)
			}
		})
	}
}
