package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSeenSet: the seen set survives a reopen, leaves pools out past the
// TTL and past the cap (oldest first), and writes seen.json only when it
// changes.
func TestSeenSet(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	type note struct {
		at    time.Duration // after t0
		pools []string
	}
	for _, tc := range []struct {
		name   string
		ttl    time.Duration
		cap    int
		notes  []note
		at     time.Duration // Seen is asked at t0+at, after a reopen at the same time
		seen   []string
		unseen []string
	}{
		{name: "kept across a reopen", notes: []note{{0, []string{"chat", "code"}}}, at: time.Hour,
			seen: []string{"chat", "code"}, unseen: []string{"chta"}},
		{name: "gone past the TTL", ttl: time.Hour, notes: []note{{0, []string{"chat"}}, {50 * time.Minute, []string{"code"}}},
			at: 61 * time.Minute, seen: []string{"code"}, unseen: []string{"chat"}},
		{name: "refreshed while live", ttl: time.Hour, notes: []note{{0, []string{"chat"}}, {20 * time.Minute, []string{"chat"}}},
			at: 61 * time.Minute, seen: []string{"chat"}},
		{name: "oldest dropped past the cap", cap: 2, notes: []note{{0, []string{"a"}}, {time.Minute, []string{"b"}}, {2 * time.Minute, []string{"c"}}},
			at: 3 * time.Minute, seen: []string{"b", "c"}, unseen: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			now := t0
			opts := Options{Now: func() time.Time { return now }, SeenTTL: tc.ttl, MaxSeenPools: tc.cap}
			s, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.notes {
				now = t0.Add(n.at)
				if err := s.NoteSeen(n.pools, now); err != nil {
					t.Fatalf("NoteSeen: %v", err)
				}
			}
			closeStore(t, s)
			now = t0.Add(tc.at)
			s = openStore(t, dir, opts)
			for _, p := range tc.seen {
				if !s.Seen(p, now) {
					t.Errorf("Seen(%q) = false after the reopen; want true", p)
				}
			}
			for _, p := range tc.unseen {
				if s.Seen(p, now) {
					t.Errorf("Seen(%q) = true after the reopen; want false", p)
				}
			}
		})
	}
}

// TestSeenWritesOnlyChanges: noting a pool already seen within the refresh
// interval writes nothing; a new pool writes seen.json.
func TestSeenWritesOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	t0 := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	path := filepath.Join(dir, seenFileName)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.NoteSeen([]string{"chat"}, t0))
	first, err := os.Stat(path)
	must(err)
	must(os.Chtimes(path, t0, t0)) // a rewrite would change the mtime
	must(s.NoteSeen([]string{"chat"}, t0.Add(59*time.Minute)))
	if st, _ := os.Stat(path); !st.ModTime().Equal(t0) {
		t.Errorf("seen.json rewritten for a pool seen 59 min before (mtime %v); want no write", st.ModTime())
	}
	must(s.NoteSeen([]string{"chat", "code"}, t0.Add(59*time.Minute)))
	if st, _ := os.Stat(path); st.ModTime().Equal(t0) || st.Size() <= first.Size() {
		t.Errorf("seen.json not rewritten for a new pool (mtime %v, %d bytes)", st.ModTime(), st.Size())
	}
}

// TestSeenCorrupt: a seen.json that does not parse stops Open with
// ErrCorruptState naming the file; the file is left as it is.
func TestSeenCorrupt(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"not JSON", "{", "invalid content"},
		{"unknown field", `{"format":1,"pools":{},"extra":1}`, "unknown field"},
		{"newer format", `{"format":2,"pools":{}}`, "unknown format 2"},
		{"bad pool name", `{"format":1,"pools":{"":"2026-01-01T00:00:00Z"}}`, "pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, seenFileName)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir, Options{})
			if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v; want ErrCorruptState naming %s and %q", err, path, tc.want)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.content {
				t.Errorf("seen.json changed to %q", b)
			}
		})
	}
}

// TestSeenAfterClose: NoteSeen after Close fails with ErrClosed and
// writes nothing.
func TestSeenAfterClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeStore(t, s)
	if err := s.NoteSeen([]string{"chat"}, time.Now()); !errors.Is(err, ErrClosed) {
		t.Fatalf("NoteSeen after Close: %v; want ErrClosed", err)
	}
	if _, err := os.Stat(filepath.Join(dir, seenFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("seen.json exists after a NoteSeen past Close: %v", err)
	}
}
