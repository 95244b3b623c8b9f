package flowq

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/testwait"
)

// flowRows renders FlowLens as "priority/flow=waiting@seconds since start".
func flowRows(fs []FlowLen, start time.Time) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprintf("%d/%s=%d@%gs", f.Priority, f.Flow, f.Waiting, f.Oldest.Sub(start).Seconds())
	}
	return out
}

// TestFlowsAndOldest: Bands and Flows report each band's and flow's
// waiting tickets and oldest entry; Flows orders a band's flows by waiting
// tickets, then the oldest, then the name, and keeps perBand per band (1 at
// least); a requeued grant keeps its flow's oldest time.
func TestFlowsAndOldest(t *testing.T) {
	c := testwait.NewClock()
	start := c.Now()
	q := New(big)
	// One ticket a second: band 5 gets a, a, a, b, c, c, c; band 0 gets d.
	for _, it := range []struct {
		flow string
		prio int32
	}{{"a", 5}, {"a", 5}, {"a", 5}, {"b", 5}, {"c", 5}, {"c", 5}, {"c", 5}, {"d", 0}} {
		mustEnqueue(t, q, c.Now(), Item{Flow: it.flow, Priority: it.prio, Tokens: 10})
		c.Advance(time.Second)
	}
	all := []string{"5/a=3@0s", "5/c=3@4s", "5/b=1@3s", "0/d=1@7s"}
	for _, tc := range []struct {
		perBand int
		want    []string
	}{
		{10, all},
		{3, all},
		{2, []string{"5/a=3@0s", "5/c=3@4s", "0/d=1@7s"}},
		{1, []string{"5/a=3@0s", "0/d=1@7s"}},
		{0, []string{"5/a=3@0s", "0/d=1@7s"}},
	} {
		if got := flowRows(q.Flows(nil, tc.perBand), start); !slices.Equal(got, tc.want) {
			t.Errorf("Flows(perBand %d) = %v, want %v", tc.perBand, got, tc.want)
		}
	}
	wantBands := []BandLen{{Priority: 5, Waiting: 7, Flows: 3, Oldest: start}, {Priority: 0, Waiting: 1, Flows: 1, Oldest: start.Add(7 * time.Second)}}
	if got := q.Bands(nil); !slices.Equal(got, wantBands) {
		t.Errorf("Bands = %+v, want %+v", got, wantBands)
	}
	// The first grant is a's head (t=0 s): while granted it is not waiting;
	// requeued, it is a's oldest again.
	g := q.Kick()
	<-g.Ready()
	if got := flowRows(q.Flows(nil, 1), start); !slices.Equal(got, []string{"5/c=3@4s", "0/d=1@7s"}) {
		t.Errorf("Flows with a's head granted = %v, want c first (a has 2 left)", got)
	}
	q.Settle(g, Saturated)
	if got := q.Bands(nil); !slices.Equal(got, wantBands) {
		t.Errorf("Bands after a requeue = %+v, want %+v", got, wantBands)
	}
}

// TestDetailCountsSinceStart: Detail reports a pool's bands, flows and
// counters; the counters outlive the queue KickAll drops when idle (and
// add up with the next queue's); a pool that never queued is not seen;
// Snapshot lists a dropped pool with its counters and no band.
func TestDetailCountsSinceStart(t *testing.T) {
	c := testwait.NewClock()
	r := NewRooms(c.Now)
	l := Limits{MaxWaiting: 10, MaxPerBand: 10}
	if _, seen := r.Detail("chat", 5); seen {
		t.Fatal("Detail of a pool that never queued is seen")
	}
	q := r.queue("chat", l)
	tk := mustEnqueue(t, q, c.Now(), Item{Flow: "a", Priority: 1})
	c.Advance(250 * time.Millisecond)
	pq, seen := r.Detail("chat", 5)
	if !seen || pq.At.Sub(pq.Bands[0].Oldest) != 250*time.Millisecond || len(pq.Flows) != 1 || pq.Flows[0].Flow != "a" || pq.Stats.Enqueued != 1 {
		t.Fatalf("Detail while a waits 250 ms = %+v, %v", pq, seen)
	}
	q.Cancel(tk, ErrCanceled)
	r.KickAll() // idle: dropped
	if n := len(r.pools); n != 0 {
		t.Fatalf("KickAll kept %d idle queues", n)
	}
	want := Stats{Enqueued: 1, Canceled: 1}
	if pq, seen := r.Detail("chat", 5); !seen || pq.Stats != want || len(pq.Bands) != 0 || len(pq.Flows) != 0 {
		t.Errorf("Detail after the drop = %+v, %v; want seen, counters %+v, no band", pq, seen, want)
	}
	if snap := r.Snapshot(nil); len(snap) != 1 || snap[0].Pool != "chat" || snap[0].Stats != want || len(snap[0].Bands) != 0 {
		t.Errorf("Snapshot after the drop = %+v", snap)
	}
	q = r.queue("chat", l)
	if _, err := q.Enqueue(c.Now(), Item{Priority: -1}); !errors.Is(err, ErrSheddable) {
		t.Fatalf("a sheddable pick: %v", err)
	}
	want.Sheddable = 1
	if pq, _ := r.Detail("chat", 5); pq.Stats != want {
		t.Errorf("counters of the new queue and the dropped one = %+v, want %+v", pq.Stats, want)
	}
}
