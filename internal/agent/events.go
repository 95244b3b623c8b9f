package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prefixroute/prefixroute/internal/kvalign"
	"github.com/prefixroute/prefixroute/internal/kvevents"
)

// eventState is the event loop's own state (one goroutine).
type eventState struct {
	dec   *kvevents.Decoder
	batch kvevents.Batch
	delta kvalign.Delta
	// next is the seq expected next; valid when haveSeq.
	next    int64
	haveSeq bool
}

// eventLoop receives the engine's KV events until ctx ends.
func (a *Agent) eventLoop(ctx context.Context) error {
	// Hashing needs the block size: from the flag or the first scrape.
	select {
	case <-a.blk:
	case <-ctx.Done():
		return nil
	}
	st := &eventState{dec: kvevents.NewDecoder()}
	for ctx.Err() == nil {
		if err := a.receive(ctx, st); err != nil {
			return err
		}
		// The socket failed (the engine went away): a new one after a
		// pause; the seq check catches whatever was missed.
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// receive handles messages from one socket until it fails (nil) or an
// event is fatal (its error).
func (a *Agent) receive(ctx context.Context, st *eventState) error {
	sub, err := kvevents.Subscribe(ctx, kvevents.SubscriberOptions{Endpoint: a.cfg.KVEvents, Bind: a.cfg.KVEventsBind, Topic: a.cfg.Topic})
	if err != nil {
		a.log.Warn("prefixagent: KV events socket", "endpoint", a.cfg.KVEvents, "err", err)
		return nil
	}
	// Closing on ctx's end unblocks Recv; the deferred Close below reports.
	stop := context.AfterFunc(ctx, func() { _ = sub.Close() })
	defer stop()
	defer func() {
		if err := sub.Close(); err != nil && ctx.Err() == nil {
			a.log.Debug("prefixagent: closing the KV events socket", "endpoint", a.cfg.KVEvents, "err", err)
		}
	}()
	if a.cfg.KVEventsReplay != "" && !st.haveSeq {
		// Learn what the engine published before the agent started. The
		// live socket is open first, so a message published during the
		// replay is either in it (skipped below as an overlap) or queued
		// on the socket; one published before the subscription took hold
		// shows as a gap at the next message and is replayed then.
		if err := a.recover(ctx, st, 0); err != nil {
			return err
		}
	}
	for {
		m, err := sub.Recv()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, kvevents.ErrFrame) {
			a.m.malformed.Inc()
			a.unknown("malformed message", err)
			continue
		}
		if err != nil {
			a.log.Warn("prefixagent: KV events socket failed; reopening", "endpoint", a.cfg.KVEvents, "err", err)
			return nil
		}
		if err := a.message(ctx, st, m); err != nil {
			return err
		}
	}
}

// message handles one live message: in order, a gap, a restart or a
// duplicate.
func (a *Agent) message(ctx context.Context, st *eventState, m kvevents.Message) error {
	a.m.messages.Inc()
	a.kvReceived()
	switch {
	case m.Seq == 0 && (!st.haveSeq || st.next > 0):
		// The publisher's first message: a fresh engine's cache is empty
		// and every change to it follows.
		if st.haveSeq {
			a.log.Info("prefixagent: the engine's publisher restarted (seq 0); its cache starts empty")
		}
		a.mu.Lock()
		if a.al != nil {
			a.al.Reset()
		}
		a.mu.Unlock()
		a.setMode(true)
	case st.haveSeq && m.Seq < st.next:
		return nil // already applied (replay overlap)
	case !st.haveSeq || m.Seq > st.next:
		from := int64(0)
		if st.haveSeq {
			from = st.next
		}
		a.m.gaps.Inc()
		if err := a.recover(ctx, st, from); err != nil {
			return err
		}
		if st.haveSeq && m.Seq < st.next {
			return nil // the replay covered it
		}
		if !st.haveSeq || m.Seq > st.next {
			a.unknown("seq gap", fmt.Errorf("expected seq %d, got %d", from, m.Seq))
		}
	}
	st.next, st.haveSeq = m.Seq+1, true
	return a.apply(st, m.Payload)
}

// recover asks the replay socket for every message from seq from on. On
// success the view is exact again and st.next follows the last replayed
// message; otherwise the view is unknown (only the error of a fatal event,
// a block size mismatch, is returned).
func (a *Agent) recover(ctx context.Context, st *eventState, from int64) error {
	if a.cfg.KVEventsReplay == "" {
		a.unknown("seq gap without a replay socket", fmt.Errorf("messages from seq %d missed", from))
		return nil
	}
	var got []kvevents.Message
	err := kvevents.Replay(ctx, a.cfg.KVEventsReplay, from, a.cfg.ReplayTimeout, func(m kvevents.Message) error {
		m.Payload = append([]byte(nil), m.Payload...)
		got = append(got, m)
		return nil
	})
	switch {
	case err != nil:
		a.m.replays.WithLabelValues("failed").Inc()
		a.unknown("replay failed", err)
		return nil
	case len(got) == 0 && from != 0:
		// The engine's buffer holds nothing from there on, though it
		// published past it: the missing messages are gone.
		a.m.replays.WithLabelValues("incomplete").Inc()
		a.unknown("replay returned nothing", fmt.Errorf("from seq %d", from))
		return nil
	case len(got) > 0 && got[0].Seq != from:
		a.m.replays.WithLabelValues("incomplete").Inc()
		a.unknown("replay does not reach back far enough", fmt.Errorf("wanted seq %d, the engine's buffer starts at %d", from, got[0].Seq))
		return nil
	}
	a.m.replays.WithLabelValues("ok").Inc()
	if len(got) > 0 {
		a.kvReceived()
	}
	if from == 0 {
		a.mu.Lock()
		if a.al != nil {
			a.al.Reset()
		}
		a.mu.Unlock()
	}
	a.setMode(true)
	st.next, st.haveSeq = from, true
	for _, m := range got {
		if m.Seq != st.next {
			a.unknown("replay skipped a seq", fmt.Errorf("expected %d, got %d", st.next, m.Seq))
			st.next = m.Seq + 1
			return nil
		}
		st.next++
		if err := a.apply(st, m.Payload); err != nil {
			return err
		}
	}
	return nil
}

// unknown turns the view unknown: the aligner forgets everything and the
// agent reports without cache events.
func (a *Agent) unknown(why string, err error) {
	a.mu.Lock()
	was := a.exact
	if a.al != nil {
		a.al.Reset()
	}
	a.mu.Unlock()
	if was {
		a.log.Warn("prefixagent: the engine's cache is unknown; reporting approximate until it clears or restarts", "why", why, "err", err)
	}
	a.m.unknowns.Inc()
	a.setMode(false)
}

// apply decodes one payload and forwards its events. Only a block size
// mismatch is returned.
func (a *Agent) apply(st *eventState, payload []byte) error {
	if err := st.dec.Decode(payload, &st.batch); err != nil {
		a.m.malformed.Inc()
		a.unknown("malformed batch", err)
		return nil
	}
	b := &st.batch
	if b.HasDPRank && b.DPRank != a.cfg.DPRank {
		a.m.otherRank.Inc()
		return nil
	}
	for i := range b.Events {
		ev := &b.Events[i]
		a.m.events(ev.Kind).Inc()
		a.mu.Lock()
		if !a.exact && ev.Kind != kvevents.KindCleared {
			a.mu.Unlock()
			continue // unknown until the engine clears its cache
		}
		before := a.al.Stats()
		st.delta.Reset()
		err := a.al.Apply(ev, &st.delta)
		if err == nil {
			if st.delta.Cleared {
				a.rep.Cleared()
			}
			a.rep.Stored(st.delta.Stored...)
			a.rep.Removed(st.delta.Removed...)
		}
		a.m.aligned(before, a.al.Stats(), a.al.Len())
		exact := a.exact
		a.mu.Unlock()
		switch {
		case errors.Is(err, kvalign.ErrBlockSize):
			return fmt.Errorf("prefixagent: %w", err)
		case err != nil:
			a.unknown("aligner overflow", err)
		case ev.Kind == kvevents.KindCleared && !exact:
			a.setMode(true)
			a.log.Info("prefixagent: the engine cleared its cache; reporting precisely again")
		}
	}
	// The batch goes out now, not with the next periodic report.
	a.mu.Lock()
	if a.exact {
		a.rep.Flush()
	}
	a.mu.Unlock()
	return nil
}
