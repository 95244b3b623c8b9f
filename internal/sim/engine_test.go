package sim

import (
	"reflect"
	"testing"
	"time"
)

// TestDeterminism: the same seed gives the same Result (its wall time
// aside); a different seed gives different traffic.
func TestDeterminism(t *testing.T) {
	sc := parse(t, tinyYAML)
	for _, v := range sc.Variants {
		t.Run(v.Name, func(t *testing.T) {
			a := run(t, sc, v.Name, RunOptions{})
			b := run(t, sc, v.Name, RunOptions{})
			if !reflect.DeepEqual(a.Records, b.Records) {
				t.Fatal("same seed, different records")
			}
			a.Wall, b.Wall = 0, 0
			if !reflect.DeepEqual(a, b) {
				t.Fatal("same seed, different results")
			}
			c := run(t, sc, v.Name, RunOptions{Seed: 99})
			if reflect.DeepEqual(a.Records, c.Records) {
				t.Fatal("seeds 11 and 99 gave the same records")
			}
		})
	}
}

// TestSameTrafficAcrossVariants: every variant sees the same requests at
// the same times with the same prompts.
func TestSameTrafficAcrossVariants(t *testing.T) {
	sc := parse(t, tinyYAML)
	key := func(res *Result) map[uint64][2]uint64 {
		m := map[uint64][2]uint64{}
		for _, r := range res.Records {
			m[r.ID] = [2]uint64{uint64(r.Arrival), uint64(r.Prompt)}
		}
		return m
	}
	want := key(run(t, sc, "softmax", RunOptions{}))
	for _, v := range []string{"argmin", "rr", "softmax-3r"} {
		if got := key(run(t, sc, v, RunOptions{})); !reflect.DeepEqual(got, want) {
			t.Fatalf("variant %s saw different traffic", v)
		}
	}
}

// TestConservation: every generated request is served exactly once, and
// tokens prefilled + tokens hit = tokens requested, per request and per
// instance; no cache ends over its capacity.
func TestConservation(t *testing.T) {
	sc := parse(t, tinyYAML)
	for _, v := range sc.Variants {
		t.Run(v.Name, func(t *testing.T) {
			res := run(t, sc, v.Name, RunOptions{})
			if len(res.Rejected) != 0 {
				t.Fatalf("%d requests rejected", len(res.Rejected))
			}
			seen := make(map[uint64]bool, len(res.Records))
			var prompt, hit uint64
			perInst := make([][2]uint64, len(res.Instances))
			for _, r := range res.Records {
				if seen[r.ID] {
					t.Fatalf("request %d served twice", r.ID)
				}
				seen[r.ID] = true
				if r.Hit > r.Prompt || r.Recomputed > r.Prompt-r.Hit || r.TTFT < r.Wait || r.Wait < 0 {
					t.Fatalf("request %d: prompt %d hit %d recomputed %d wait %v ttft %v", r.ID, r.Prompt, r.Hit, r.Recomputed, r.Wait, r.TTFT)
				}
				prompt += uint64(r.Prompt)
				hit += uint64(r.Hit)
				perInst[r.Instance][0] += uint64(r.Prompt - r.Hit)
				perInst[r.Instance][1] += uint64(r.Hit)
			}
			for id := range uint64(res.Generated) {
				if !seen[id] {
					t.Fatalf("request %d of %d never served", id, res.Generated)
				}
			}
			if len(res.Records) != res.Generated || res.Generated < 1000 {
				t.Fatalf("%d served of %d generated", len(res.Records), res.Generated)
			}
			var prefilled, instHit uint64
			for i, in := range res.Instances {
				if in.Prefilled != perInst[i][0] || in.Hit != perInst[i][1] {
					t.Fatalf("%s: counters prefilled %d hit %d, records say %d and %d", in.ID, in.Prefilled, in.Hit, perInst[i][0], perInst[i][1])
				}
				if in.CacheBlocks > in.CacheCapacity {
					t.Fatalf("%s holds %d blocks, capacity %d", in.ID, in.CacheBlocks, in.CacheCapacity)
				}
				prefilled += in.Prefilled
				instHit += in.Hit
			}
			if prefilled+instHit != prompt || instHit != hit {
				t.Fatalf("prefilled %d + hit %d != requested %d", prefilled, instHit, prompt)
			}
		})
	}
}

// TestCacheNeverOverCapacity checks every instance's cache after every
// event of a run with caches far too small for the working set.
func TestCacheNeverOverCapacity(t *testing.T) {
	sc := parse(t, tinyYAML)
	for i := range sc.Deployments {
		sc.Deployments[i].KVBlocks = 37
	}
	rc, err := sc.variantConfig("softmax")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(rc, RunOptions{Duration: 10 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.start(); err != nil {
		t.Fatal(err)
	}
	evictions := 0
	for e.q.Len() > 0 {
		if err := e.handle(e.q.pop()); err != nil {
			t.Fatal(err)
		}
		for _, in := range e.insts {
			if n := in.cache.Len(); n > in.cache.Capacity() || n != len(in.cache.pos) {
				t.Fatalf("%s at %v: %d blocks, capacity %d", in.ID, e.now, n, in.cache.Capacity())
			}
			if in.cache.Len() == in.cache.Capacity() {
				evictions++
			}
		}
	}
	if evictions == 0 {
		t.Fatal("the caches never filled; the test checks nothing")
	}
}

// TestRouterIndexMatchesCaches: with cache events, right after an
// instance's report the router state's idea of the blocks it holds is
// exactly its cache (so the router predicts hits exactly when nothing
// happened since).
func TestRouterIndexMatchesCaches(t *testing.T) {
	sc := parse(t, tinyYAML)
	res := run(t, sc, "softmax", RunOptions{})
	exact := 0
	for _, r := range res.Records {
		if r.Predicted == r.Hit {
			exact++
		}
	}
	if float64(exact) < 0.9*float64(len(res.Records)) {
		t.Fatalf("router predicted the hit exactly for only %d of %d requests", exact, len(res.Records))
	}
	rc, _ := sc.variantConfig("softmax")
	e, err := newEngine(rc, RunOptions{Duration: 8 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.start(); err != nil {
		t.Fatal(err)
	}
	for e.q.Len() > 0 {
		if err := e.handle(e.q.pop()); err != nil {
			t.Fatal(err)
		}
	}
	for k, in := range e.insts {
		if err := e.reportNow(k); err != nil {
			t.Fatal(err)
		}
		pool := e.routers[0].(*stateRouter).pool
		var held []uint64
		in.cache.Each(func(h uint64) { held = append(held, h) })
		for _, st := range pool.Instances(epoch.Add(e.now)) {
			if st.Instance == in.ID && st.CachedBlocks != len(held) {
				t.Fatalf("%s: router indexes %d blocks, the cache holds %d", in.ID, st.CachedBlocks, len(held))
			}
		}
	}
}
