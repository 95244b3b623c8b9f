package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestReportAllMatchesReport: the same reports applied one by one and in
// groups by ReportAll leave the same instances and the same index (seeded
// random cache events over a small hash space, so that blocks are shared,
// removed and evicted); a replaced session is ErrSessionEnded at its place
// and the others still apply.
func TestReportAllMatchesReport(t *testing.T) {
	const instances, rounds = 6, 40
	_, one := newTestPool(t, Limits{})
	_, all := newTestPool(t, Limits{})
	var s1, s2 []*Session
	for i := range instances {
		id := fmt.Sprint("i", i)
		rep := &Report{ReportsCacheEvents: true, KVCapacityBlocks: 16, PrefillTokensPerSecond: 1000}
		s1 = append(s1, connect(t, one, t0, fmt.Sprint("d", i%2), id, rep))
		s2 = append(s2, connect(t, all, t0, fmt.Sprint("d", i%2), id, rep))
	}
	rng := rand.New(rand.NewPCG(7, 11))
	hashes := func(n int) []uint64 {
		out := make([]uint64, n)
		for k := range out {
			out[k] = uint64(rng.IntN(40) + 1)
		}
		return out
	}
	for r := range rounds {
		now := t0.Add(time.Duration(r+1) * 100 * time.Millisecond)
		var reps []*Report
		for range instances {
			reps = append(reps, &Report{Seq: uint64(r + 2), ReportsCacheEvents: true, KVCapacityBlocks: 16, PrefillTokensPerSecond: 1000,
				RunningRequests: uint32(rng.IntN(8)), Stored: hashes(rng.IntN(6)), Removed: hashes(rng.IntN(3)), CacheCleared: rng.IntN(20) == 0})
		}
		for i, s := range s1 {
			if err := s.Report(now, reps[i]); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, instances)
		all.ReportAll(now, s2, reps, errs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: ReportAll error %d: %v", r, i, err)
			}
		}
		mustInvariants(t, all)
		if a, b := one.Instances(now), all.Instances(now); !reflect.DeepEqual(a, b) {
			t.Fatalf("round %d: instances differ:\n one by one %+v\n ReportAll  %+v", r, a, b)
		}
		if a1, a2 := one.IndexStats(); true {
			if b1, b2 := all.IndexStats(); a1 != b1 || a2 != b2 {
				t.Fatalf("round %d: index %d blocks %d pairs one by one, %d / %d by ReportAll", r, a1, a2, b1, b2)
			}
		}
	}
	// i2 is replaced by a newer session: its report fails, the others apply.
	connect(t, all, t0.Add(time.Hour), "d0", "i2", &Report{})
	errs := make([]error, instances)
	reps := make([]*Report, instances)
	for i := range reps {
		reps[i] = &Report{Seq: 100, PrefillTokensPerSecond: 1000, RunningRequests: 7}
	}
	all.ReportAll(t0.Add(time.Hour), s2, reps, errs)
	for i, err := range errs {
		if want := i == 2; errors.Is(err, ErrSessionEnded) != want || (err != nil) != want {
			t.Errorf("errs[%d] = %v", i, err)
		}
	}
	if st := statusOf(t, all, t0.Add(time.Hour), "i3"); st.Last.Seq != 100 || st.Last.RunningRequests != 7 {
		t.Errorf("i3 after ReportAll: %+v", st)
	}
}
