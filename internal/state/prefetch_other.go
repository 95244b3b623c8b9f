//go:build !amd64 && !arm64

package state

// prefetch does nothing on this architecture (see prefetch.go): the
// match then meets its cache misses one block after another.
func prefetch(addrs *[peekAhead]uintptr) {}
