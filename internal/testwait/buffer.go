package testwait

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// SyncBuffer is a bytes.Buffer for the concurrent writes of a logger or of
// a process's stdout and stderr, read while they write. Safe for
// concurrent use; the zero value is empty and ready.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// JSONLines parses the JSON log lines written to s so far, one map a line;
// a line that is not a JSON object fails t.
func (s *SyncBuffer) JSONLines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// Logged is the JSON log lines written to s so far whose "msg" is msg.
func (s *SyncBuffer) Logged(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range s.JSONLines(t) {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}
