package testwait

import (
	"bytes"
	"sync"
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
