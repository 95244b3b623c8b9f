package flowq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/testwait"
)

// settleAll runs the grant chain from t: each granted ticket whose name is
// in full parks under "canary", any other is dispatched. It returns the
// dispatched names in order.
func settleAll(q *Queue, t *Ticket, names map[*Ticket]string, full map[string]bool) []string {
	var out []string
	for t != nil {
		<-t.Ready()
		if full[names[t]] {
			t = q.Park(t, "canary")
			continue
		}
		out = append(out, names[t])
		t = q.Settle(t, Dispatched)
	}
	return out
}

// A pick whose deployment is full parks; the picks behind it, of the same
// flow, are dispatched at once (no head-of-line blocking), and the parked
// ones come back in their order when their key is kicked, before the later
// picks of their flow.
func TestParkPassesTheGrant(t *testing.T) {
	q := New(big)
	names := map[*Ticket]string{}
	for _, n := range []string{"c1", "s1", "c2", "s2"} {
		names[mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Tokens: 10})] = n
	}
	full := map[string]bool{"c1": true, "c2": true}
	if got := fmt.Sprint(settleAll(q, q.Kick(), names, full)); got != "[s1 s2]" {
		t.Fatalf("dispatched %s, want [s1 s2]", got)
	}
	if q.Len() != 0 || q.Held() != 2 || q.Stats().Held != 2 {
		t.Fatalf("Len %d Held %d Stats.Held %d; want 0, 2, 2", q.Len(), q.Held(), q.Stats().Held)
	}
	names[mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Tokens: 10})] = "s3"
	// A kick for another deployment leaves them parked.
	if got := fmt.Sprint(settleAll(q, q.KickKey("stable"), names, full)); got != "[s3]" || q.Held() != 2 {
		t.Fatalf("KickKey(stable): dispatched %s, held %d; want [s3], 2", got, q.Held())
	}
	names[mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Tokens: 10})] = "s4"
	clear(full)
	if got := fmt.Sprint(settleAll(q, q.KickKey("canary"), names, full)); got != "[c1 c2 s4]" {
		t.Fatalf("KickKey(canary): dispatched %s, want [c1 c2 s4]", got)
	}
	if q.Len() != 0 || q.Held() != 0 || len(q.parked) != 0 || len(q.parkedBand) != 0 || len(q.deadline) != 0 {
		t.Fatalf("not empty: Len %d Held %d parked %d bands %d heap %d", q.Len(), q.Held(), len(q.parked), len(q.parkedBand), len(q.deadline))
	}
}

// A parked pick is refunded: while parked it does not count as its flow's
// dispatch, so fairness between flows is by what was dispatched.
func TestParkRefunds(t *testing.T) {
	q := New(big)
	a := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "a", Tokens: 1000})
	b := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "b", Tokens: 10})
	g := q.Kick()
	if g != a {
		t.Fatal("the first grant is not a's (the earliest head on a tie)")
	}
	<-g.Ready()
	next := q.Park(a, "canary")
	if next != b {
		t.Fatal("the grant did not pass to b")
	}
	<-b.Ready()
	q.Settle(b, Dispatched)
	if f := a.flow; f.served != 0 {
		t.Fatalf("flow a charged %d tokens after its pick parked; want 0", f.served)
	}
}

// Parked picks wait: they count against the limits, leave at their
// deadline and when canceled, and Rooms keeps their queue.
func TestParkedLimitsDeadlineCancel(t *testing.T) {
	q := New(Limits{MaxWaiting: 3, MaxPerBand: 2})
	dl := testwait.Epoch.Add(time.Second)
	t1 := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Tokens: 1, Deadline: dl})
	t2 := mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Tokens: 1})
	g := q.Kick()
	<-g.Ready()
	if g = q.Park(g, "canary"); g != t2 {
		t.Fatal("the grant did not pass to t2")
	}
	<-g.Ready()
	q.Park(g, "canary")
	if q.Held() != 2 || q.Len() != 0 {
		t.Fatalf("Held %d Len %d; want 2, 0", q.Held(), q.Len())
	}
	// Band 0 holds 2 parked picks: at its limit of 2.
	if _, err := q.Enqueue(testwait.Epoch, Item{Flow: "g"}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a third pick of band 0: %v, want ErrQueueFull (queue_max_per_band 2)", err)
	}
	mustEnqueue(t, q, testwait.Epoch, Item{Flow: "g", Priority: 1})
	// 2 parked and 1 waiting: at queue_max_waiting 3; a pick of band 1
	// displaces no one of its own flow.
	if _, err := q.Enqueue(testwait.Epoch, Item{Flow: "g", Priority: 1}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("a fourth pick: %v, want ErrQueueFull (queue_max_waiting 3)", err)
	}
	if n := q.Expire(dl); n != 1 || !errors.Is(t1.Err(), ErrQueueTimeout) {
		t.Fatalf("Expire: %d left, t1 %v; want 1, ErrQueueTimeout", n, t1.Err())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.Wait(ctx, t2, nil); !errors.Is(err, ErrCanceled) {
		t.Fatalf("Wait of a parked ticket with a canceled context: %v", err)
	}
	if q.Held() != 0 || len(q.parked) != 0 || len(q.parkedBand) != 0 {
		t.Fatalf("Held %d parked %d bands %d after expiry and cancel; want 0", q.Held(), len(q.parked), len(q.parkedBand))
	}
	if b := q.Bands(nil); len(b) != 1 || b[0].Priority != 1 || b[0].Waiting != 1 || b[0].Held != 0 {
		t.Fatalf("Bands %+v, want one band 1 with 1 waiting", b)
	}
}

// Bands counts parked picks as waiting, in their band, also a band with
// only parked picks.
func TestBandsCountParked(t *testing.T) {
	q := New(big)
	mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Priority: 5})
	mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Priority: 1})
	mustEnqueue(t, q, testwait.Epoch, Item{Flow: "f", Priority: 1})
	g := q.Kick() // band 5
	<-g.Ready()
	g = q.Park(g, "canary") // band 1's first
	<-g.Ready()
	g = q.Park(g, "canary") // band 1's second
	<-g.Ready()
	q.Settle(g, Saturated)
	got := fmt.Sprint(q.Bands(nil))
	want := fmt.Sprint([]BandLen{{Priority: 5, Waiting: 1, Held: 1}, {Priority: 1, Waiting: 2, Held: 1, Flows: 1, Oldest: testwait.Epoch}})
	if got != want {
		t.Fatalf("Bands %s, want %s", got, want)
	}
}

// Rooms.Hold parks a pick whose try reports its key full, and dispatches
// it after KickKey; a pick for another deployment goes through meanwhile.
func TestHoldParksUnderKey(t *testing.T) {
	r := NewRooms(nil)
	ctx := context.Background()
	full := make(chan bool, 1)
	full <- true
	canaryFull := func() (bool, string) {
		f := <-full
		full <- f
		if f {
			return true, "canary"
		}
		return false, ""
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Hold(ctx, "p", big, time.Hour, Item{Flow: "f"}, canaryFull)
		done <- err
	}()
	held := func() int {
		r.mu.RLock()
		q := r.pools["p"]
		r.mu.RUnlock()
		if q == nil {
			return 0
		}
		return q.Held()
	}
	testwait.Eventually(t, "the canary pick to park", func() bool { return held() == 1 })
	if w, err := r.Hold(ctx, "p", big, time.Hour, Item{Flow: "f"}, func() (bool, string) { return false, "" }); err != nil || w != 0 {
		t.Fatalf("a stable pick behind a parked one: waited %v, %v; want 0, nil", w, err)
	}
	<-full
	full <- false
	r.KickKey("p", "stable")
	if held() != 1 {
		t.Fatal("KickKey of another deployment released the parked pick")
	}
	r.KickKey("p", "canary")
	if err := <-done; err != nil {
		t.Fatalf("the parked pick: %v", err)
	}
}
