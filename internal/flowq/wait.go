package flowq

import (
	"context"
	"errors"
	"time"
)

// Wait blocks the calling goroutine (no other goroutine is started) until t
// is granted, and returns nil: the caller retries its pick and must Settle
// t. Otherwise t leaves the queue and Wait returns why: ErrCanceled when
// ctx is canceled, ErrQueueTimeout when ctx's deadline passes, when expired
// fires (the caller's timer at the ticket's deadline; nil for none) or
// when Expire removed t. A grant that races with the end of the wait is
// passed on (Settle Gone), so capacity is never lost.
func (q *Queue) Wait(ctx context.Context, t *Ticket, expired <-chan time.Time) error {
	q.mu.Lock()
	st, err := t.state, t.err
	q.mu.Unlock()
	if st == left && err != nil {
		return err // already out (its signal may have been read)
	}
	var why error
	select {
	case <-t.ready:
		return q.woken(t)
	case <-ctx.Done():
		why = ErrCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = ErrQueueTimeout
		}
	case <-expired:
		why = ErrQueueTimeout
	}
	if q.Cancel(t, why) {
		return why
	}
	// A grant or Expire got there first: its signal is buffered.
	<-t.ready
	if err := q.woken(t); err != nil {
		return err
	}
	q.Settle(t, Gone)
	return why
}

// woken is the outcome of a ready signal: nil for a grant, else why t left.
func (q *Queue) woken(t *Ticket) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state == granted {
		return nil
	}
	return t.err
}
