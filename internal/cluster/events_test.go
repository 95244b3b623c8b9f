package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// eventLog records OnEvents calls: payload copies per (origin, pool).
type eventLog struct {
	mu      sync.Mutex
	got     map[string][][]byte // origin + "|" + pool -> payloads
	batches int
	n       int
}

func (e *eventLog) handler(pool, origin string, sentAt time.Time, payloads [][]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.got == nil {
		e.got = map[string][][]byte{}
	}
	k := origin + "|" + pool
	e.got[k] = append(e.got[k], payloads...) // payloads[i] may be retained
	e.batches++
	e.n += len(payloads)
}

func (e *eventLog) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func (e *eventLog) of(origin, pool string) [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]byte(nil), e.got[origin+"|"+pool]...)
}

func eventLinks(t testing.TB, url string, names ...string) ([]*Link, []*eventLog) {
	var links []*Link
	var logs []*eventLog
	for _, name := range names {
		lg := &eventLog{}
		links = append(links, dial(t, testConfig(url, name), Handlers{OnEvents: lg.handler}))
		logs = append(logs, lg)
	}
	return links, logs
}

func seqPayload(i int) []byte { return binary.BigEndian.AppendUint32(make([]byte, 0, 8), uint32(i)) }

// seqPayload100 is a 100-byte payload starting with i.
func seqPayload100(i int) []byte {
	return binary.BigEndian.AppendUint32(make([]byte, 0, 100), uint32(i))[:100]
}

func TestEventsFanOutExactlyOnce(t *testing.T) {
	ns := natstest.Start(t)
	links, logs := eventLinks(t, ns.URL(), "a", "b", "c")
	const n = 500
	for i := range n {
		if err := links[0].Publish("p", seqPayload(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := links[0].Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		testwait.EventuallyWithin(t, 5*time.Second, fmt.Sprintf("%s to get %d events", links[i].Name(), n), func() bool { return logs[i].count() >= n })
	}
	// A sentinel event sent after the n: events from one origin arrive in
	// order, so once a receiver has it, every copy of the n it will get has
	// been processed (ReceivedEvents counts it before OnEvents runs).
	if err := links[0].Publish("sentinel", seqPayload(n)); err != nil {
		t.Fatal(err)
	}
	if err := links[0].Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		testwait.EventuallyWithin(t, 5*time.Second, links[i].Name()+" to get the sentinel", func() bool { return len(logs[i].of("a", "sentinel")) == 1 })
	}
	for _, i := range []int{1, 2} {
		if got := logs[i].of("a", "p"); len(got) != n {
			t.Fatalf("%s got %d events, want exactly %d", links[i].Name(), len(got), n)
		}
	}
	if c := logs[0].count(); c != 0 {
		t.Fatalf("sender received %d of its own events", c)
	}
	st := links[0].Stats()
	if st.PublishedEvents != n+1 || st.PublishedBatches == 0 || st.PublishedBatches >= n {
		t.Fatalf("sender stats %+v: want %d events (the sentinel included) in fewer batches", st, n+1)
	}
	if st := links[1].Stats(); st.ReceivedEvents != n+1 || st.LagCount == 0 {
		t.Fatalf("receiver stats %+v", st)
	}
}

func TestEventsBatchingOrderPerOrigin(t *testing.T) {
	ns := natstest.Start(t)
	links, logs := eventLinks(t, ns.URL(), "a", "b", "c")
	const n = 10000 // 100 B each: 1 MB per origin, several size-bound batches
	var wg sync.WaitGroup
	for _, l := range links[:2] { // two origins publishing concurrently
		wg.Go(func() {
			for i := range n {
				if err := l.Publish("pool", seqPayload100(i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	testwait.EventuallyWithin(t, 10*time.Second, "c to get both streams", func() bool { return logs[2].count() >= 2*n })
	for _, origin := range []string{"a", "b"} {
		got := logs[2].of(origin, "pool")
		if len(got) != n {
			t.Fatalf("from %s: %d events, want %d", origin, len(got), n)
		}
		for i, p := range got {
			if v := binary.BigEndian.Uint32(p); v != uint32(i) {
				t.Fatalf("from %s: event %d carries %d: out of order", origin, i, v)
			}
		}
	}
	testwait.EventuallyWithin(t, 10*time.Second, "a to get b's stream", func() bool { return logs[0].count() >= n })
	if got := logs[0].of("b", "pool"); len(got) != n {
		t.Fatalf("a got %d of b's events, want %d", len(got), n)
	}
	st := links[0].Stats()
	t.Logf("a: %d events in %d batches (%d bytes); c: lag last %v ewma %v max %v",
		st.PublishedEvents, st.PublishedBatches, st.PublishedBytes, links[2].Stats().LagLast, links[2].Stats().LagEWMA, links[2].Stats().LagMax)
	if st.PublishedBatches*10 > st.PublishedEvents {
		t.Fatalf("batching ineffective: %d batches for %d events", st.PublishedBatches, st.PublishedEvents)
	}
}

func TestEventsPoolNamesRoundTrip(t *testing.T) {
	ns := natstest.Start(t)
	links, logs := eventLinks(t, ns.URL(), "a", "b")
	pools := []string{"plain-Pool_1", "llama.3.70b", "with space", "ünïcödé/名前", "", "*", ">", "=x", "tab\tnl\n", "a.b.*.>"}
	for i, p := range pools {
		if err := links[0].Publish(p, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	testwait.EventuallyWithin(t, 5*time.Second, "all pools", func() bool { return logs[1].count() >= len(pools) })
	for i, p := range pools {
		got := logs[1].of("a", p)
		if len(got) != 1 || string(got[0]) != fmt.Sprint(i) {
			t.Fatalf("pool %q: got %q", p, got)
		}
	}
}

func TestEventsLargeAndOversized(t *testing.T) {
	ns := natstest.Start(t)
	a := dial(t, Config{URLs: []string{ns.URL()}, Name: "a", MaxBatchBytes: 4 << 10}, Handlers{})
	lg := &eventLog{}
	dial(t, testConfig(ns.URL(), "b"), Handlers{OnEvents: lg.handler})
	big := make([]byte, 100<<10) // over MaxBatchBytes, under max_payload: sent alone
	for i := range big {
		big[i] = byte(i)
	}
	for i := range 10 {
		if err := a.Publish("p", fmt.Appendf(nil, "%01000d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Publish("p", big); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish("p", make([]byte, 1<<20)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1 MiB payload: %v, want ErrTooLarge", err)
	}
	testwait.EventuallyWithin(t, 5*time.Second, "11 events", func() bool { return lg.count() >= 11 })
	got := lg.of("a", "p")
	if len(got) != 11 || string(got[10]) != string(big) || string(got[3]) != fmt.Sprintf("%01000d", 3) {
		t.Fatalf("got %d events", len(got))
	}
	if st := a.Stats(); st.PublishedBatches < 3 {
		t.Fatalf("%d batches for 10 KB + 100 KB at MaxBatchBytes 4 KiB", st.PublishedBatches)
	}
}

func TestTokenAndFraming(t *testing.T) {
	for _, s := range []string{"", "a", "A-b_9", "a.b", " ", "ünï", "=", "==x", "*", ">", "\x00\xff"} {
		tok := EncodeToken(s)
		for _, c := range tok {
			if c == '.' || c == '*' || c == '>' || c <= ' ' || c > '~' {
				t.Fatalf("EncodeToken(%q) = %q: not a subject token", s, tok)
			}
		}
		if back, err := DecodeToken(tok); err != nil || back != s {
			t.Fatalf("DecodeToken(EncodeToken(%q)=%q) = %q, %v", s, tok, back, err)
		}
	}
	for _, bad := range []string{"a.b", "=!!", "", "a b"} {
		if _, err := DecodeToken(bad); err == nil {
			t.Fatalf("DecodeToken(%q) accepted", bad)
		}
	}
	var b []byte
	want := [][]byte{{}, []byte("x"), make([]byte, 300)}
	for _, p := range want {
		b = appendFrame(b, p)
	}
	got, err := splitFrames(nil, b)
	if err != nil || len(got) != 3 || len(got[2]) != 300 || len(got[0]) != 0 {
		t.Fatalf("splitFrames = %v, %v", got, err)
	}
	for _, bad := range [][]byte{{0x05, 1, 2}, {0x80}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		if _, err := splitFrames(nil, bad); err == nil {
			t.Fatalf("splitFrames(%x) accepted", bad)
		}
	}
}

func FuzzSplitFrames(f *testing.F) {
	f.Add([]byte{0x01, 'a', 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := splitFrames(nil, data)
		if err != nil {
			return
		}
		var re []byte
		for _, p := range frames {
			re = appendFrame(re, p)
		}
		if again, err := splitFrames(nil, re); err != nil || len(again) != len(frames) {
			t.Fatalf("re-framing changed the frames")
		}
	})
}
