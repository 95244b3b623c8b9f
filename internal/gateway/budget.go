package gateway

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// DefaultBufferedBodyBytes is the default daemon-wide budget of request
// body bytes the front ends hold at once (--max-buffered-body-bytes):
// 256 MiB, sixteen bodies at the 16 MiB per-request limit.
const DefaultBufferedBodyBytes = 256 << 20

// ReasonBodyBudget is the reason of a request refused because the
// daemon-wide budget of buffered body bytes is spent (503).
const ReasonBodyBudget = "body_budget"

// BodyBudget is a daemon-wide count of buffered request body bytes against
// a limit, shared by the front ends that read bodies (ext_proc, POST
// /v1/route). Safe for concurrent use; a nil *BodyBudget has no limit.
type BodyBudget struct {
	max  int64
	used atomic.Int64
}

// NewBodyBudget returns a budget of max bytes; max <= 0 means no limit
// (nil).
func NewBodyBudget(max int64) *BodyBudget {
	if max <= 0 {
		return nil
	}
	return &BodyBudget{max: max}
}

// Take reserves n more bytes, or returns the 503 answer naming the limit
// when they do not fit, reserving nothing. The caller gives every byte it
// took back with Give when the request ends, however it ends.
func (b *BodyBudget) Take(n int) *Error {
	if b == nil || n <= 0 {
		return nil
	}
	if used := b.used.Add(int64(n)); used > b.max {
		b.used.Add(-int64(n))
		return &Error{Status: http.StatusServiceUnavailable, Reason: ReasonBodyBudget,
			Message: fmt.Sprintf("the router is buffering too many request bodies: %d more bytes would pass the daemon-wide limit of %d buffered body bytes (--max-buffered-body-bytes); retry later",
				n, b.max)}
	}
	return nil
}

// Give returns n bytes taken with Take.
func (b *BodyBudget) Give(n int) {
	if b != nil && n > 0 {
		b.used.Add(-int64(n))
	}
}

// Used returns the bytes taken now.
func (b *BodyBudget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}
