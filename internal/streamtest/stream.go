// Package streamtest holds a gRPC server stream for tests that call a
// streaming handler directly, without a network: the report engine's tests
// and the report fuzzers.
package streamtest

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
)

// Stream is a server stream (grpc.ServerStreamingServer and
// grpc.BidiStreamingServer shapes) fed from In, then io.EOF, that records
// every message the handler sends. Only Context, Recv and Send are
// implemented; the embedded grpc.ServerStream is nil, so any other method
// panics. Safe for concurrent use by the handler and the test.
type Stream[Req, Resp any] struct {
	grpc.ServerStream

	// Ctx is the stream's context; nil means context.Background().
	Ctx context.Context
	// In holds the messages Recv returns, in order.
	In []*Req

	mu   sync.Mutex
	sent []*Resp
}

// Context returns s.Ctx, or context.Background() when it is nil.
func (s *Stream[Req, Resp]) Context() context.Context {
	if s.Ctx == nil {
		return context.Background()
	}
	return s.Ctx
}

// Recv returns the next message of In, then io.EOF.
func (s *Stream[Req, Resp]) Recv() (*Req, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.In) == 0 {
		return nil, io.EOF
	}
	m := s.In[0]
	s.In = s.In[1:]
	return m, nil
}

// Send records m.
func (s *Stream[Req, Resp]) Send(m *Resp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, m)
	return nil
}

// Sent returns a copy of what the handler sent so far, in order.
func (s *Stream[Req, Resp]) Sent() []*Resp {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Resp(nil), s.sent...)
}
