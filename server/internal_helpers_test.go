package server

import (
	"io"
	"testing"
)

// closeAtEnd closes c (a Server, a store.Store, ...) when the test ends and
// fails the test if Close returns an error: what they write must reach disk.
func closeAtEnd(tb testing.TB, what string, c io.Closer) {
	tb.Helper()
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("%s.Close: %v", what, err)
		}
	})
}
