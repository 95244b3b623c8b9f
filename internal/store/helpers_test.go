package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testClock returns a clock that starts at a fixed instant (not UTC, with
// nanoseconds) and advances one second per call.
func testClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

// openStore opens a store in dir and closes it when the test ends.
func openStore(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	if opts.Now == nil {
		opts.Now = testClock()
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { closeStore(t, s) })
	return s
}

// readFile returns the content of path, or nil if it does not exist.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// auditLines decodes every line of the audit log of s.
func auditLines(t *testing.T, s *Store) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range bytes.Lines(readFile(t, s.AuditLogPath())) {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// faultFS is the OS file system with injected failures: each rule fails
// one operation on one file, after skipping the first skip matches.
type faultFS struct {
	osFS
	mu    sync.Mutex
	rules []*faultRule
}

// faultRule fails op ("open", "write", "sync", "close", "stat", "rename",
// "remove", "truncate") on target ("tmp", "state", "audit", "dir").
type faultRule struct {
	op, target string
	skip       int  // matches to let through first
	always     bool // fail every match after skip, not only the first
	fired      int
}

var errInjected = errors.New("injected fault")

func target(name string) string {
	switch {
	case strings.HasSuffix(name, stateFileName+".tmp"):
		return "tmp"
	case filepath.Base(name) == stateFileName:
		return "state"
	case filepath.Base(name) == auditFileName:
		return "audit"
	}
	return "dir"
}

func (f *faultFS) fail(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.op != op || r.target != target(name) {
			continue
		}
		if r.skip > 0 {
			r.skip--
			continue
		}
		if r.fired == 0 || r.always {
			r.fired++
			return errInjected
		}
	}
	return nil
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	if err := f.fail("open", name); err != nil {
		return nil, err
	}
	inner, err := f.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{file: inner, fs: f, name: name}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.fail("rename", oldpath); err != nil {
		return err
	}
	return f.osFS.Rename(oldpath, newpath)
}

func (f *faultFS) Remove(name string) error {
	if err := f.fail("remove", name); err != nil {
		return err
	}
	return f.osFS.Remove(name)
}

type faultFile struct {
	file
	fs   *faultFS
	name string
}

// Write fails after writing half of p, like a disk filling up.
func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.fail("write", f.name); err != nil {
		n, _ := f.file.Write(p[:len(p)/2])
		return n, err
	}
	return f.file.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.fail("sync", f.name); err != nil {
		return err
	}
	return f.file.Sync()
}

func (f *faultFile) Close() error {
	if err := f.fs.fail("close", f.name); err != nil {
		_ = f.file.Close() // the injected fault is the error to report
		return err
	}
	return f.file.Close()
}

func (f *faultFile) Stat() (os.FileInfo, error) {
	if err := f.fs.fail("stat", f.name); err != nil {
		return nil, err
	}
	return f.file.Stat()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.fail("truncate", f.name); err != nil {
		return err
	}
	return f.file.Truncate(size)
}

// closeStore closes s and reports a Close error with t.Error; for defer and
// t.Cleanup, where a Close error must not pass unseen.
func closeStore(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
