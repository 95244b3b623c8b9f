package client

import (
	"context"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// linkStream is one ReportLoadBatch stream of a BatchLink and the instances
// on it. Its sender goroutine sends the queued messages, its receiver
// dispatches acks and ends to the instances. Its fields are guarded by mu.
type linkStream struct {
	link   *BatchLink
	st     grpc.BidiStreamingClient[pb.ReportLoadBatchRequest, pb.ReportLoadBatchResponse]
	cancel context.CancelFunc

	mu       sync.Mutex
	space    *sync.Cond // signalled when the queue shrinks or the stream ends
	subs     map[linkKey]*linkSub
	sealed   []*pb.ReportLoadBatchRequest // ready to go, in order
	open     *pb.ReportLoadBatchRequest   // collecting; nil when empty
	firstAt  time.Time                    // of open's first item
	queued   int                          // reports in sealed and open
	fresh    int                          // instances with a report in open
	first    bool                         // no message sent yet
	draining bool                         // the last instance left: send what is queued, then CloseSend
	err      error                        // the stream's end; nil while it runs
	kick     chan struct{}
}

func newLinkStream(k *BatchLink, st grpc.BidiStreamingClient[pb.ReportLoadBatchRequest, pb.ReportLoadBatchResponse], cancel context.CancelFunc) *linkStream {
	ls := &linkStream{link: k, st: st, cancel: cancel, subs: map[linkKey]*linkSub{}, first: true, kick: make(chan struct{}, 1)}
	ls.space = sync.NewCond(&ls.mu)
	go ls.sendLoop()
	go ls.recvLoop()
	return ls
}

// join adds instance key for as long as ctx lives.
func (ls *linkStream) join(ctx context.Context, key linkKey) (reportStream, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.err != nil || ls.draining {
		return nil, errLinkDraining
	}
	old := ls.subs[key]
	if old != nil && !old.closed {
		return nil, errLinkInstance
	}
	sub := &linkSub{ls: ls, key: key, ctx: ctx, wake: make(chan struct{}, 1)}
	ls.subs[key] = sub
	if old != nil {
		// The instance's previous Reporter closed and waits for its end (a
		// mode switch): it ends now, and message keeps the new session's
		// reports after the close in the sidecar's order.
		if old.inOpen {
			ls.fresh--
		}
		ls.drop(old, io.EOF)
	}
	sub.stop = context.AfterFunc(ctx, sub.cancelled)
	return sub, nil
}

// message returns the message being collected, sealing it first when it
// is full or already closes key (a report for key must not precede the
// close of its previous session in one message).
func (ls *linkStream) message(key linkKey) *pb.ReportLoadBatchRequest {
	if m := ls.open; m != nil && (len(m.Reports) >= MaxBatchReports || closes(m, key)) {
		ls.seal()
	}
	if ls.open == nil {
		ls.open, ls.firstAt = &pb.ReportLoadBatchRequest{}, time.Now()
		if ls.first && len(ls.sealed) == 0 {
			if iv := ls.link.opts.AckInterval; iv > 0 {
				ls.open.AckIntervalMs = uint32(iv.Milliseconds())
			}
		}
	}
	return ls.open
}

func closes(m *pb.ReportLoadBatchRequest, key linkKey) bool {
	for _, c := range m.Closed {
		if c.GetPool() == key.pool && c.GetInstanceId() == key.instance {
			return true
		}
	}
	return false
}

// seal moves the message being collected to the ready ones.
func (ls *linkStream) seal() {
	ls.sealed = append(ls.sealed, ls.open)
	ls.open = nil
	for _, s := range ls.subs {
		s.inOpen = false
	}
	ls.fresh = 0
}

// enqueue queues sub's report r, waiting while the queue is full.
func (ls *linkStream) enqueue(sub *linkSub, r *pb.ReportLoadRequest) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for ls.queued >= linkQueueMax && sub.err == nil && ls.err == nil {
		ls.space.Wait()
	}
	if sub.err != nil || ls.err != nil {
		return io.EOF // the instance's end is what Recv returns
	}
	m := ls.message(sub.key)
	m.Reports = append(m.Reports, r)
	ls.queued++
	if !sub.inOpen {
		sub.inOpen = true
		ls.fresh++
	}
	ls.poke()
	return nil
}

// closeInstance queues the end of sub's session, after any report of it
// in the same message (the sidecar applies a message's reports before its
// closed). sub stays on the stream until its InstanceEnded, or the
// stream's end, arrives; join may replace it before. The caller holds mu.
func (ls *linkStream) closeInstance(sub *linkSub) {
	m := ls.message(linkKey{}) // no key: a close never needs a new message
	m.Closed = append(m.Closed, &pb.InstanceRef{Pool: sub.key.pool, InstanceId: sub.key.instance})
	ls.poke()
}

func (ls *linkStream) poke() {
	select {
	case ls.kick <- struct{}{}:
	default:
	}
}

// take returns the messages due now, and how long until the one being
// collected is due. It goes out when every instance has a report in it,
// MaxDelay after its first item, or when the stream drains. The caller
// holds mu.
func (ls *linkStream) take(now time.Time) (ready []*pb.ReportLoadBatchRequest, wait time.Duration) {
	if ls.open != nil {
		wait = ls.firstAt.Add(ls.link.opts.MaxDelay).Sub(now)
		if ls.draining || wait <= 0 || ls.fresh >= len(ls.subs) {
			ls.seal()
			wait = 0
		}
	}
	ready, ls.sealed = ls.sealed, nil
	for _, m := range ready {
		ls.queued -= len(m.Reports)
	}
	if len(ready) > 0 {
		ls.first = false
		ls.space.Broadcast()
	}
	return ready, wait
}

// sendLoop sends the queued messages until the stream ends or drains.
func (ls *linkStream) sendLoop() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ls.kick:
		case <-t.C:
		}
		ls.mu.Lock()
		ready, wait := ls.take(time.Now())
		done := ls.err != nil || ls.draining && ls.open == nil && len(ls.sealed) == 0
		ls.mu.Unlock()
		for _, m := range ready {
			if err := ls.st.Send(m); err != nil {
				return // the receiver sees the stream's end
			}
			ls.link.count(len(m.Reports))
		}
		if done {
			if ls.err == nil {
				_ = ls.st.CloseSend() // the receiver sees the end
			}
			return
		}
		if wait > 0 {
			t.Reset(wait)
		}
	}
}

// recvLoop passes acks and ends to the instances until the stream ends,
// then ends every instance still on it.
func (ls *linkStream) recvLoop() {
	defer ls.cancel()
	for {
		r, err := ls.st.Recv()
		if err != nil {
			ls.fail(err)
			return
		}
		ls.mu.Lock()
		for _, a := range r.GetAcks() {
			if sub := ls.subs[linkKey{a.GetInstance().GetPool(), a.GetInstance().GetInstanceId()}]; sub != nil {
				sub.acks = append(sub.acks, a.GetAck())
				sub.signal()
			}
		}
		for _, e := range r.GetEnded() {
			key := linkKey{e.GetInstance().GetPool(), e.GetInstance().GetInstanceId()}
			if sub := ls.subs[key]; sub != nil {
				var err error = io.EOF // closed: a clean end
				if c := codes.Code(e.GetCode()); c != codes.OK {
					err = status.Error(c, e.GetMessage())
				}
				ls.drop(sub, err)
			}
		}
		ls.mu.Unlock()
	}
}

// fail ends the stream and every instance on it with err.
func (ls *linkStream) fail(err error) {
	ls.link.leave(ls)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.err == nil {
		ls.err = err
	}
	for _, sub := range ls.subs {
		ls.drop(sub, err)
	}
	ls.poke()
}

// drop ends sub with err and takes it off the stream; the last instance to
// leave drains the stream. The caller holds mu.
func (ls *linkStream) drop(sub *linkSub, err error) {
	if sub.err == nil {
		sub.err = err
	}
	if ls.subs[sub.key] == sub {
		delete(ls.subs, sub.key)
		if sub.inOpen {
			ls.fresh--
		}
	}
	sub.stop()
	sub.signal()
	ls.space.Broadcast()
	if len(ls.subs) == 0 && ls.err == nil && !ls.draining {
		ls.draining = true
		go ls.link.leave(ls) // not under mu: leave takes the link's lock
		ls.poke()
	}
}

// linkSub is one Reporter's instance on a linkStream: the reportStream its
// Reporter uses. Its fields are guarded by the stream's mu.
type linkSub struct {
	ls     *linkStream
	key    linkKey
	ctx    context.Context
	stop   func() bool // stops the ctx watch
	wake   chan struct{}
	acks   []*pb.ReportLoadResponse // received, not yet read by Recv
	err    error                    // the instance's end; nil while it runs
	closed bool                     // CloseSend was called
	inOpen bool                     // has a report in the message being collected
}

// Send queues r for the next message, naming the instance on it.
func (s *linkSub) Send(r *pb.ReportLoadRequest) error {
	r.Pool, r.InstanceId = s.key.pool, s.key.instance
	return s.ls.enqueue(s, r)
}

// Recv returns the instance's next ack, or its end: io.EOF after a clean
// close, else the status the sidecar ended it with (or the stream's).
func (s *linkSub) Recv() (*pb.ReportLoadResponse, error) {
	for {
		s.ls.mu.Lock()
		if len(s.acks) > 0 {
			a := s.acks[0]
			s.acks = s.acks[1:]
			s.ls.mu.Unlock()
			return a, nil
		}
		err := s.err
		s.ls.mu.Unlock()
		if err != nil {
			return nil, err
		}
		<-s.wake
	}
}

// CloseSend ends the instance's session cleanly: its last ack and an end
// (io.EOF from Recv) follow.
func (s *linkSub) CloseSend() error {
	s.ls.mu.Lock()
	defer s.ls.mu.Unlock()
	if s.closed || s.err != nil {
		return nil
	}
	s.closed = true
	s.ls.closeInstance(s)
	return nil
}

// cancelled ends the instance when its context ends: the sidecar closes
// its session, and Recv returns the context's status.
func (s *linkSub) cancelled() {
	ls := s.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if s.err != nil {
		return
	}
	if !s.closed && ls.err == nil {
		s.closed = true
		ls.closeInstance(s)
	}
	ls.drop(s, status.FromContextError(s.ctx.Err()).Err())
}

// signal wakes Recv. The caller holds the stream's mu.
func (s *linkSub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
