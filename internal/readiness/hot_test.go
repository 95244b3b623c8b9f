package readiness_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
)

// recordKeys records one pick on A per key, the i-th at t0 + i·step, with a
// two-block chain whose first hash is the key.
func recordKeys(tr *readiness.Tracker, keys []uint64, step time.Duration) {
	for i, k := range keys {
		hs := []uint64{k, splitmix(k, 1)}
		snap, d := twoDeps.build(pick{hashes: hs, prompt: 32, depMatch: []int{2, 0}, matched: 2})
		tr.Record(at(time.Duration(i)*step), hs, 32, snap, d)
	}
}

func TestHotZipf(t *testing.T) {
	// 200 000 requests over 10 000 prefixes, Zipf s = 1.2, seeded; 1 ms
	// apart, so all inside the 5-minute window and no bucket expires: the
	// table is plain Space-Saving over the stream.
	const n, capacity = 200_000, 256
	rng := rand.New(rand.NewPCG(42, 43))
	z := rand.NewZipf(rng, 1.2, 1, 9_999)
	keys := make([]uint64, n)
	truth := map[uint64]uint64{}
	for i := range keys {
		keys[i] = splitmix(7, z.Uint64())
		truth[keys[i]]++
	}
	tr := readiness.New(readiness.Config{HotPrefixes: capacity})
	recordKeys(tr, keys, time.Millisecond)
	st, err := tr.Status(at(n*time.Millisecond), readiness.Query{From: "A", To: "B", TopK: 100}, deepLive{})
	if err != nil {
		t.Fatal(err)
	}
	type kc struct{ key, count uint64 }
	var want []kc
	for k, c := range truth {
		want = append(want, kc{k, c})
	}
	slices.SortFunc(want, func(a, b kc) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	if len(st.HotPrefixes) != 100 {
		t.Fatalf("%d hot prefixes, want 100", len(st.HotPrefixes))
	}
	for i := range 10 {
		if h := st.HotPrefixes[i]; h.FirstBlockHash != want[i].key || h.Requests != want[i].count || h.Overestimate != 0 {
			t.Errorf("#%d: %x requests %d (over %d), want %x with %d", i, h.FirstBlockHash, h.Requests,
				h.Overestimate, want[i].key, want[i].count)
		}
	}
	// The Space-Saving bound on every entry reported.
	for i, h := range st.HotPrefixes {
		tc := truth[h.FirstBlockHash]
		if h.Requests-h.Overestimate > tc || tc > h.Requests || h.Overestimate > n/capacity {
			t.Errorf("#%d %x: requests %d over %d, true %d, bound N/k = %d", i, h.FirstBlockHash,
				h.Requests, h.Overestimate, tc, n/capacity)
		}
		if h.DepthFrom != 2 || h.DepthTo != 0 || h.ExtraTokens != 32 || h.Blocks != 2 || h.PromptTokens != 32 {
			t.Errorf("#%d: %+v", i, h)
		}
	}
	// A window later everything has left it.
	st, err = tr.Status(at(n*time.Millisecond+5*time.Minute), readiness.Query{From: "A", To: "B"}, deepLive{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.HotPrefixes) != 0 || st.Picks != 0 {
		t.Errorf("after a window: %d hot, %d picks", len(st.HotPrefixes), st.Picks)
	}
}

func TestHotEviction(t *testing.T) {
	x, y, z, w := splitmix(1, 1), splitmix(1, 2), splitmix(1, 3), splitmix(1, 4)
	byKey := func(hs []readiness.HotPrefix) map[uint64][2]uint64 {
		m := map[uint64][2]uint64{}
		for _, h := range hs {
			m[h.FirstBlockHash] = [2]uint64{h.Requests, h.Overestimate}
		}
		return m
	}
	tests := []struct {
		name string
		keys []uint64
		step time.Duration
		now  time.Duration
		want map[uint64][2]uint64 // key → requests, overestimate
	}{
		// Capacity 2: z replaces y (1 request, x has 2) and inherits it.
		{"z takes the smallest count", []uint64{x, x, y, z}, time.Second, 4 * time.Second,
			map[uint64][2]uint64{x: {2, 0}, z: {2, 1}}},
		// w then replaces the smaller of x (2) and z (2): the lowest entry,
		// x's.
		{"ties evict the first entry", []uint64{x, x, y, z, w}, time.Second, 5 * time.Second,
			map[uint64][2]uint64{w: {3, 2}, z: {2, 1}}},
		// Two buckets of 10 s: y is admitted at t0+10s inheriting x's count
		// from t0+0s; once that bucket leaves (t0+20s..), y's count is its
		// own and its overestimate 0.
		{"inherited counts leave with their bucket", []uint64{x, z, y}, 5 * time.Second, 25 * time.Second,
			map[uint64][2]uint64{y: {1, 0}}},
		{"still inside", []uint64{x, z, y}, 5 * time.Second, 19 * time.Second,
			map[uint64][2]uint64{y: {2, 1}, z: {1, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := readiness.New(readiness.Config{HotPrefixes: 2, Window: 20 * time.Second, Buckets: 2})
			recordKeys(tr, tt.keys, tt.step)
			st, err := tr.Status(at(tt.now), readiness.Query{From: "A", To: "B"}, deepLive{})
			if err != nil {
				t.Fatal(err)
			}
			if got := byKey(st.HotPrefixes); !maps(got, tt.want) {
				t.Errorf("hot %v, want %v", got, tt.want)
			}
		})
	}
}

func maps(a, b map[uint64][2]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
