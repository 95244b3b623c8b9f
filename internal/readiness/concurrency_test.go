package readiness_test

import (
	"sync"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
)

// TestConcurrentUse runs Records and Statuses from several goroutines (run
// it with -race).
func TestConcurrentUse(t *testing.T) {
	picks := benchPicks(64, 2, 16, false)
	tr := readiness.New(readiness.Config{Window: 10 * time.Second, Buckets: 10})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				p := &picks[(g*7+i)%len(picks)]
				tr.Record(at(time.Duration(i)*time.Millisecond), p.hashes, p.prompt, p.snap, p.d)
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			st, err := tr.Status(at(time.Duration(i)*40*time.Millisecond),
				readiness.Query{From: "dep-0", To: "dep-1"}, benchLive{})
			if err != nil {
				t.Error(err)
				return
			}
			checkFinite(t, st)
		}
	})
	wg.Wait()
	st, err := tr.Status(at(2*time.Second), readiness.Query{From: "dep-0", To: "dep-1"}, benchLive{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Picks != 8000 {
		t.Errorf("picks %d, want 8000", st.Picks)
	}
}

// TestRecordNoAllocs checks a warm Record allocates nothing, the window
// sliding included.
func TestRecordNoAllocs(t *testing.T) {
	picks := benchPicks(128, 2, 32, false)
	tr := readiness.New(readiness.Config{Window: 10 * time.Second, Buckets: 10})
	now, i := t0, 0
	step := func() {
		p := &picks[i%len(picks)]
		tr.Record(now, p.hashes, p.prompt, p.snap, p.d)
		now = now.Add(time.Millisecond)
		i++
	}
	for range 11_000 { // a whole window and more
		step()
	}
	if n := testing.AllocsPerRun(5000, step); n != 0 {
		t.Errorf("Record allocates %v times per call", n)
	}
}
