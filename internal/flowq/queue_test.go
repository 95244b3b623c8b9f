package flowq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/testwait"
)

var big = Limits{MaxWaiting: 100000, MaxPerBand: 100000}

// mustEnqueue enqueues it or fails the test.
func mustEnqueue(t *testing.T, q *Queue, now time.Time, it Item) *Ticket {
	t.Helper()
	tk, err := q.Enqueue(now, it)
	if err != nil {
		t.Fatalf("Enqueue(%+v): %v", it, err)
	}
	return tk
}

// drain grants and dispatches up to n tickets, returning them in order,
// and leaves no grant outstanding.
func drain(q *Queue, n int) []*Ticket {
	var out []*Ticket
	t := q.Kick()
	for t != nil && len(out) < n {
		<-t.Ready()
		out = append(out, t)
		if len(out) == n {
			// Stop the chain: the next grant goes back to its place.
			if next := q.Settle(t, Dispatched); next != nil {
				<-next.Ready()
				q.Settle(next, Saturated)
			}
			break
		}
		t = q.Settle(t, Dispatched)
	}
	return out
}

func TestStrictPriority(t *testing.T) {
	c := testwait.NewClock()
	q := New(big)
	// Low first, then high, then a middle band: the high band goes first
	// whatever the arrival order, FCFS within each.
	var want []string
	for i, p := range []int32{0, 0, 5, 0, 5, 2} {
		mustEnqueue(t, q, c.Now(), Item{Flow: fmt.Sprint("f", i), Priority: p, Tokens: 10})
	}
	want = []string{"f2", "f4", "f5", "f0", "f1", "f3"}
	got := drain(q, 6)
	if len(got) != len(want) {
		t.Fatalf("dispatched %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].item.Flow != want[i] {
			t.Errorf("dispatch %d: flow %s (priority %d), want %s", i, got[i].item.Flow, got[i].item.Priority, want[i])
		}
	}
	if q.Len() != 0 || len(q.bands) != 0 {
		t.Errorf("after draining: Len %d, bands %d; want 0, 0", q.Len(), len(q.bands))
	}
}

func TestFCFSWithinFlow(t *testing.T) {
	c := testwait.NewClock()
	q := New(big)
	var tks []*Ticket
	for i := 0; i < 5; i++ {
		tks = append(tks, mustEnqueue(t, q, c.Now(), Item{Flow: "a", Tokens: uint64(100 - i)}))
		c.Advance(time.Millisecond)
	}
	for i, g := range drain(q, 5) {
		if g != tks[i] {
			t.Errorf("dispatch %d is ticket %d, want FCFS", i, g.seq)
		}
	}
}

// A flooding flow of long prompts against a light flow of short ones: both
// backlogged, the dispatched prompt tokens split evenly (within one
// request), not the request count.
func TestFairnessByTokens(t *testing.T) {
	c := testwait.NewClock()
	q := New(big)
	for i := 0; i < 500; i++ {
		mustEnqueue(t, q, c.Now(), Item{Flow: "flood", Tokens: 1000})
	}
	for i := 0; i < 500; i++ {
		mustEnqueue(t, q, c.Now(), Item{Flow: "light", Tokens: 100})
	}
	tokens := map[string]uint64{}
	count := map[string]int{}
	for _, g := range drain(q, 220) {
		tokens[g.item.Flow] += g.item.Tokens
		count[g.item.Flow]++
	}
	// Exact: 20 flood picks (20,000 tokens) and 200 light picks (20,000).
	if count["flood"] != 20 || count["light"] != 200 {
		t.Errorf("dispatched flood %d, light %d picks; want 20, 200", count["flood"], count["light"])
	}
	if tokens["flood"] != tokens["light"] {
		t.Errorf("tokens flood %d, light %d; want equal", tokens["flood"], tokens["light"])
	}
}

// A flow that starts waiting late is lifted to the band's least counter: it
// cannot claim the tokens it did not use while idle.
func TestLateFlowLifted(t *testing.T) {
	c := testwait.NewClock()
	q := New(big)
	for i := 0; i < 100; i++ {
		mustEnqueue(t, q, c.Now(), Item{Flow: "a", Tokens: 10})
	}
	drain(q, 50) // a has 500 tokens dispatched
	for i := 0; i < 100; i++ {
		mustEnqueue(t, q, c.Now(), Item{Flow: "b", Tokens: 10})
	}
	count := map[string]int{}
	for _, g := range drain(q, 20) {
		count[g.item.Flow]++
	}
	// b starts at a's counter, so the two alternate: 10 and 10 (a first on
	// the tie: its head is older).
	if count["a"] != 10 || count["b"] != 10 {
		t.Errorf("after b joined: a %d, b %d; want 10, 10", count["a"], count["b"])
	}
}

func TestTTLExpiry(t *testing.T) {
	c := testwait.NewClock()
	q := New(big)
	t1 := mustEnqueue(t, q, c.Now(), Item{Flow: "a", Deadline: c.Now().Add(100 * time.Millisecond)})
	t2 := mustEnqueue(t, q, c.Now(), Item{Flow: "a", Deadline: c.Now().Add(50 * time.Millisecond)})
	t3 := mustEnqueue(t, q, c.Now(), Item{Flow: "a"})
	c.Advance(49 * time.Millisecond)
	if n := q.Expire(c.Now()); n != 0 {
		t.Fatalf("at 49 ms: %d expired, want 0", n)
	}
	c.Advance(time.Millisecond)
	if n := q.Expire(c.Now()); n != 1 {
		t.Fatalf("at 50 ms: %d expired, want 1 (the deadline is inclusive)", n)
	}
	<-t2.Ready()
	if !errors.Is(t2.Err(), ErrQueueTimeout) {
		t.Errorf("expired ticket: Err %v, want ErrQueueTimeout", t2.Err())
	}
	c.Advance(time.Hour)
	if n := q.Expire(c.Now()); n != 1 {
		t.Fatalf("an hour later: %d expired, want 1 (t3 has no deadline)", n)
	}
	if !errors.Is(t1.Err(), ErrQueueTimeout) || t3.Err() != nil || q.Len() != 1 {
		t.Errorf("t1 %v, t3 %v, Len %d; want timeout, nil, 1", t1.Err(), t3.Err(), q.Len())
	}
	if s := q.Stats(); s.Timeout != 2 {
		t.Errorf("Stats.Timeout %d, want 2", s.Timeout)
	}
}

func TestCancel(t *testing.T) {
	c := testwait.NewClock()
	q := New(big)
	a := mustEnqueue(t, q, c.Now(), Item{Flow: "a", Deadline: c.Now().Add(time.Second)})
	b := mustEnqueue(t, q, c.Now(), Item{Flow: "a"})
	d := mustEnqueue(t, q, c.Now(), Item{Flow: "a"})
	if !q.Cancel(b, ErrCanceled) {
		t.Fatal("Cancel of a waiting ticket returned false")
	}
	if q.Cancel(b, ErrCanceled) {
		t.Error("second Cancel returned true")
	}
	if !q.Cancel(a, ErrCanceled) || len(q.deadline) != 0 {
		t.Errorf("cancel of the head: deadline heap %d, want 0", len(q.deadline))
	}
	got := drain(q, 1)
	if len(got) != 1 || got[0] != d {
		t.Fatalf("after canceling a and b the next is not d")
	}
	if q.Cancel(d, ErrCanceled) {
		t.Error("Cancel of a dispatched ticket returned true")
	}
}

// One grant at a time: however many capacity events, only one ticket holds
// a grant until it settles. A Saturated settle puts it back at the head of
// its flow with its tokens refunded and grants nothing more.
func TestOneGrantAtATime(t *testing.T) {
	c := testwait.NewClock()
	q := New(big)
	a := mustEnqueue(t, q, c.Now(), Item{Flow: "a", Tokens: 100})
	mustEnqueue(t, q, c.Now(), Item{Flow: "a", Tokens: 100})
	mustEnqueue(t, q, c.Now(), Item{Flow: "b", Tokens: 1})
	g := q.Kick()
	if g != a {
		t.Fatalf("first grant is not a")
	}
	<-g.Ready()
	for i := 0; i < 10; i++ {
		if q.Kick() != nil {
			t.Fatalf("Kick %d granted a second ticket while one is outstanding", i)
		}
	}
	if next := q.Settle(a, Saturated); next != nil {
		t.Fatal("a Saturated settle granted another ticket")
	}
	if q.Len() != 3 || q.bands[0].flows["a"].served != 0 {
		t.Fatalf("after requeue: Len %d, a served %d; want 3, 0", q.Len(), q.bands[0].flows["a"].served)
	}
	if g := q.Kick(); g != a {
		t.Fatal("the requeued ticket lost its place")
	}
}

func TestLimitsAtTheEdge(t *testing.T) {
	c := testwait.NewClock()
	tests := []struct {
		name   string
		limits Limits
		prios  []int32
		full   int // index of the first refused Enqueue, -1 none
	}{
		{"pool limit 3: the 3rd fits", Limits{MaxWaiting: 3, MaxPerBand: 10}, []int32{0, 1, 2}, -1},
		{"pool limit 3: the 4th is refused (no lower band to displace)", Limits{MaxWaiting: 3, MaxPerBand: 10}, []int32{3, 2, 1, 1}, 3},
		{"band limit 2: 2 per band fit", Limits{MaxWaiting: 10, MaxPerBand: 2}, []int32{0, 0, 1, 1}, -1},
		{"band limit 2: the 3rd in a band is refused", Limits{MaxWaiting: 10, MaxPerBand: 2}, []int32{0, 1, 0, 0}, 3},
		{"limits below 1 count as 1", Limits{}, []int32{1, 0}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := New(tt.limits)
			for i, p := range tt.prios {
				_, err := q.Enqueue(c.Now(), Item{Priority: p})
				if (i == tt.full) != (err != nil) {
					t.Fatalf("Enqueue %d (priority %d): err %v, want refused %v", i, p, err, i == tt.full)
				}
				if err != nil && (!errors.Is(err, ErrQueueFull) || Reason(err) != "queue_full") {
					t.Errorf("refusal %v is not queue_full", err)
				}
			}
		})
	}
}

func TestSheddableRefused(t *testing.T) {
	q := New(big)
	_, err := q.Enqueue(testwait.Epoch, Item{Priority: -1})
	if !errors.Is(err, ErrSheddable) || Reason(err) != "sheddable_rejected" || q.Len() != 0 {
		t.Errorf("priority -1: err %v, Len %d; want sheddable_rejected, 0", err, q.Len())
	}
	if _, err := q.Enqueue(testwait.Epoch, Item{Priority: 0}); err != nil {
		t.Errorf("priority 0 is not sheddable: %v", err)
	}
}

// At the pool limit a higher priority displaces the newest ticket of the
// lowest band (which leaves with queue_full); an equal or lower priority is
// refused.
func TestDisplaceAtPoolLimit(t *testing.T) {
	c := testwait.NewClock()
	q := New(Limits{MaxWaiting: 3, MaxPerBand: 3})
	q.KeepDisplaced()
	a := mustEnqueue(t, q, c.Now(), Item{Flow: "a", Priority: 0})
	b := mustEnqueue(t, q, c.Now(), Item{Flow: "a", Priority: 0})
	mustEnqueue(t, q, c.Now(), Item{Flow: "h", Priority: 5})
	if _, err := q.Enqueue(c.Now(), Item{Flow: "a", Priority: 0}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("the lowest band's own flow at the limit: %v, want queue_full", err)
	}
	h2 := mustEnqueue(t, q, c.Now(), Item{Flow: "h", Priority: 5})
	if !errors.Is(b.Err(), ErrQueueFull) || a.Err() != nil || q.Len() != 3 {
		t.Fatalf("after displacing: b %v, a %v, Len %d; want queue_full, nil, 3", b.Err(), a.Err(), q.Len())
	}
	if got := q.Displaced(nil); len(got) != 1 || got[0] != b {
		t.Fatalf("Displaced = %v, want [b]", got)
	}
	if err := q.Wait(context.Background(), b, nil); !errors.Is(err, ErrQueueFull) {
		t.Errorf("Wait of a displaced ticket: %v, want queue_full", err)
	}
	mustEnqueue(t, q, c.Now(), Item{Flow: "h", Priority: 5}) // displaces a
	if _, err := q.Enqueue(c.Now(), Item{Flow: "h", Priority: 5}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("only flow h of priority 5 waits: %v, want queue_full", err)
	}
	if got := drain(q, 3); got[0].item.Priority != 5 || got[1] != h2 {
		t.Errorf("the high band was not kept in order")
	}
}

// At a limit within one band, a light flow displaces the newest ticket of
// the flow with the most waiting tickets; that flow itself, or a flow with
// at most one fewer waiting, is refused.
func TestDisplaceWithinBand(t *testing.T) {
	c := testwait.NewClock()
	q := New(Limits{MaxWaiting: 100, MaxPerBand: 3})
	for range 3 {
		mustEnqueue(t, q, c.Now(), Item{Flow: "heavy", Tokens: 1000})
	}
	if _, err := q.Enqueue(c.Now(), Item{Flow: "heavy", Tokens: 1000}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("heavy at its band's limit: %v, want queue_full", err)
	}
	light := mustEnqueue(t, q, c.Now(), Item{Flow: "light", Tokens: 10})
	if q.Len() != 3 || q.bands[0].flows["heavy"].n != 2 {
		t.Fatalf("after light joined: Len %d, heavy waiting %d; want 3, 2", q.Len(), q.bands[0].flows["heavy"].n)
	}
	// heavy 2, light 1: a second light pick is refused (2 is not > 1 + 1).
	if _, err := q.Enqueue(c.Now(), Item{Flow: "light", Tokens: 10}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("second light pick: %v, want queue_full", err)
	}
	if got := drain(q, 3); got[0].item.Flow != "heavy" || got[1] != light {
		t.Errorf("order after displacing: %s, %s; want heavy (older head on a tie), light", got[0].item.Flow, got[1].item.Flow)
	}
}
