package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// configLog records OnConfig calls.
type configLog struct {
	mu      sync.Mutex
	entries []Entry
	seen    map[string]time.Time // "key@rev" -> when seen
}

func (c *configLog) handler(key string, value []byte, rev uint64, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	c.entries = append(c.entries, Entry{Key: key, Value: value, Revision: rev, Deleted: deleted})
	c.seen[fmt.Sprintf("%s@%d", key, rev)] = time.Now()
}

func (c *configLog) seenAt(key string, rev uint64) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.seen[fmt.Sprintf("%s@%d", key, rev)]
	return t, ok
}

func (c *configLog) snapshot() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Entry(nil), c.entries...)
}

// checkOrdered fails unless revisions only grow and none repeats.
func (c *configLog) checkOrdered(t *testing.T, who string) {
	t.Helper()
	var last uint64
	for _, e := range c.snapshot() {
		if e.Revision <= last {
			t.Fatalf("%s: revision %d (%s) after %d: not in order or repeated", who, e.Revision, e.Key, last)
		}
		last = e.Revision
	}
}

func threeLinks(t *testing.T, url string) ([]*Link, []*configLog) {
	var links []*Link
	var logs []*configLog
	for _, name := range []string{"a", "b", "c"} {
		lg := &configLog{}
		links = append(links, dial(t, testConfig(url, name), Handlers{OnConfig: lg.handler}))
		logs = append(logs, lg)
	}
	return links, logs
}

func TestConfigUpdateSeenByOthers(t *testing.T) {
	ns := natstest.Start(t)
	links, logs := threeLinks(t, ns.URL())
	ctx := context.Background()

	var worst time.Duration
	rev, err := links[0].Create(ctx, "weights.p1", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		start := time.Now()
		if rev, err = links[i%3].Update(ctx, "weights.p1", fmt.Appendf(nil, "v%d", i+2), rev); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		for j, lg := range logs {
			testwait.EventuallyWithin(t, 5*time.Second, fmt.Sprintf("link %d to see rev %d", j, rev), func() bool {
				_, ok := lg.seenAt("weights.p1", rev)
				return ok
			})
			at, _ := lg.seenAt("weights.p1", rev)
			worst = max(worst, at.Sub(start))
		}
	}
	// Bound measured here: Update return -> every watcher called. The
	// assertion (5s) is loose on purpose; the log shows the real number.
	t.Logf("worst update-to-all-watchers latency over 20 updates x 3 links: %v", worst)
	for i, lg := range logs {
		lg.checkOrdered(t, links[i].Name())
	}

	// A link dialled now gets the current values before Dial returns.
	late := &configLog{}
	dial(t, testConfig(ns.URL(), "late"), Handlers{OnConfig: late.handler})
	got := late.snapshot()
	if len(got) != 1 || got[0].Revision != rev || string(got[0].Value) != "v21" {
		t.Fatalf("late link initial sync = %+v, want weights.p1@%d=v21", got, rev)
	}
}

func TestConcurrentConflictingUpdate(t *testing.T) {
	ns := natstest.Start(t)
	links, _ := threeLinks(t, ns.URL())
	ctx := context.Background()
	for round := 0; round < 10; round++ {
		key := fmt.Sprintf("policy.r%d", round)
		base, err := links[0].Create(ctx, key, []byte("base"))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		revs := make([]uint64, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() {
				<-start
				revs[i], errs[i] = links[i+1].Update(ctx, key, []byte(links[i+1].Name()), base)
			})
		}
		close(start)
		wg.Wait()
		win, lose := 0, 1
		if errs[0] != nil {
			win, lose = 1, 0
		}
		if errs[win] != nil || errs[lose] == nil {
			t.Fatalf("round %d: want exactly one winner, got errs %v / %v", round, errs[0], errs[1])
		}
		var mm *RevisionMismatchError
		if !errors.Is(errs[lose], ErrRevisionMismatch) || !errors.As(errs[lose], &mm) {
			t.Fatalf("round %d: loser error %v, want ErrRevisionMismatch", round, errs[lose])
		}
		if !mm.CurrentKnown || mm.Current != revs[win] || mm.Expected != base {
			t.Fatalf("round %d: mismatch %+v, want current %d expected %d", round, mm, revs[win], base)
		}
		e, err := links[0].Get(ctx, key)
		if err != nil || e.Revision != revs[win] || string(e.Value) != links[win+1].Name() {
			t.Fatalf("round %d: Get = %+v, %v; want winner's value at %d", round, e, err, revs[win])
		}
	}
}

func TestKVBasicsAndHistory(t *testing.T) {
	ns := natstest.Start(t)
	l := dial(t, testConfig(ns.URL(), "a"), Handlers{})
	ctx := context.Background()

	if _, err := l.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: %v, want ErrNotFound", err)
	}
	if _, err := l.History(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("History missing: %v, want ErrNotFound", err)
	}
	if _, err := l.Create(ctx, "bad key", nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Create bad key: %v, want ErrInvalidKey", err)
	}
	key := "weights." + EncodeToken("pool with spaces")
	var revs []uint64
	rev, err := l.Create(ctx, key, []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	revs = append(revs, rev)
	if _, err := l.Create(ctx, key, []byte("x")); !errors.Is(err, ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	for i := 1; i < 5; i++ {
		if rev, err = l.Update(ctx, key, fmt.Appendf(nil, "%d", i), rev); err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	if err := l.Delete(ctx, key, revs[0]); !errors.Is(err, ErrRevisionMismatch) {
		t.Fatalf("Delete stale: %v, want ErrRevisionMismatch", err)
	}
	if err := l.Delete(ctx, key, rev); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get deleted: %v, want ErrNotFound", err)
	}
	hist, err := l.History(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 6 {
		t.Fatalf("History has %d entries, want 5 values + 1 delete marker: %+v", len(hist), hist)
	}
	for i, e := range hist[:5] {
		if e.Revision != revs[i] || string(e.Value) != fmt.Sprint(i) || e.Deleted || e.Key != key {
			t.Fatalf("History[%d] = %+v, want rev %d value %d", i, e, revs[i], i)
		}
	}
	if !hist[5].Deleted || hist[5].Revision <= revs[4] {
		t.Fatalf("History[5] = %+v, want the delete marker", hist[5])
	}
	// Update on the deleted key with a stale revision reports the marker.
	var mm *RevisionMismatchError
	if _, err := l.Update(ctx, key, nil, revs[4]); !errors.As(err, &mm) || mm.Current != hist[5].Revision {
		t.Fatalf("Update after delete: %v, want mismatch with current %d", err, hist[5].Revision)
	}
	// Create works again after a delete.
	if _, err := l.Create(ctx, key, []byte("again")); err != nil {
		t.Fatalf("Create after delete: %v", err)
	}
}

func TestHistoryKeepsConfiguredRevisions(t *testing.T) {
	ns := natstest.Start(t)
	cfg := testConfig(ns.URL(), "a")
	cfg.Bucket, cfg.History = "short", 4
	l := dial(t, cfg, Handlers{})
	ctx := context.Background()
	rev, err := l.Create(ctx, "k", []byte("0"))
	for i := 1; i < 10 && err == nil; i++ {
		rev, err = l.Update(ctx, "k", fmt.Appendf(nil, "%d", i), rev)
	}
	if err != nil {
		t.Fatal(err)
	}
	hist, err := l.History(ctx, "k")
	if err != nil || len(hist) != 4 || string(hist[3].Value) != "9" || string(hist[0].Value) != "6" {
		t.Fatalf("History = %+v, %v; want the last 4 revisions (6..9)", hist, err)
	}
}
