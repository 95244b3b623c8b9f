package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Entry is one revision of a config key.
type Entry struct {
	Key   string
	Value []byte
	// Revision is the bucket-wide sequence number of this write; it only
	// grows, so it orders writes across keys too.
	Revision uint64
	Created  time.Time
	// Deleted marks a delete (or purge) marker; Value is empty.
	Deleted bool
}

func toEntry(e jetstream.KeyValueEntry) Entry {
	return Entry{
		Key:      e.Key(),
		Value:    e.Value(),
		Revision: e.Revision(),
		Created:  e.Created(),
		Deleted:  e.Operation() != jetstream.KeyValuePut,
	}
}

// kvCtx checks the link and bounds ctx by ApplyTimeout.
func (l *Link) kvCtx(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := l.ready(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ApplyTimeout)
	return ctx, cancel, nil
}

// Get returns the current value of key, or ErrNotFound if it is unset or
// deleted, or ErrUnavailable.
func (l *Link) Get(ctx context.Context, key string) (Entry, error) {
	opCtx, cancel, err := l.kvCtx(ctx)
	if err != nil {
		return Entry{}, err
	}
	defer cancel()
	e, err := l.kv.Get(opCtx, key)
	if err != nil {
		return Entry{}, mapErr(ctx, err)
	}
	return toEntry(e), nil
}

// Create sets key to value if it has no value (never set or deleted) and
// returns the new revision; otherwise it fails with ErrExists.
func (l *Link) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	opCtx, cancel, err := l.kvCtx(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	rev, err := l.kv.Create(opCtx, key, value)
	return rev, mapErr(ctx, err)
}

// Update sets key to value only if its current revision is lastRevision
// (compare-and-set) and returns the new revision. A stale lastRevision
// fails with a *RevisionMismatchError (errors.Is ErrRevisionMismatch)
// carrying the current revision when it could be read. lastRevision 0
// means "the key was never written".
func (l *Link) Update(ctx context.Context, key string, value []byte, lastRevision uint64) (uint64, error) {
	opCtx, cancel, err := l.kvCtx(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	rev, err := l.kv.Update(opCtx, key, value, lastRevision)
	if isWrongLastSeq(err) {
		return 0, l.mismatch(opCtx, key, lastRevision)
	}
	return rev, mapErr(ctx, err)
}

// Delete places a delete marker on key (the history is kept). With
// lastRevision > 0 it is a compare-and-set like Update.
func (l *Link) Delete(ctx context.Context, key string, lastRevision uint64) error {
	opCtx, cancel, err := l.kvCtx(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var opts []jetstream.KVDeleteOpt
	if lastRevision > 0 {
		opts = append(opts, jetstream.LastRevision(lastRevision))
	}
	err = l.kv.Delete(opCtx, key, opts...)
	if isWrongLastSeq(err) {
		return l.mismatch(opCtx, key, lastRevision)
	}
	return mapErr(ctx, err)
}

// History returns the revisions of key the bucket still keeps (at most
// Config.History), oldest first, delete markers included; ErrNotFound if
// there are none.
func (l *Link) History(ctx context.Context, key string) ([]Entry, error) {
	opCtx, cancel, err := l.kvCtx(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	hist, err := l.kv.History(opCtx, key)
	if err == nil && opCtx.Err() != nil {
		// The watcher behind History stops silently on a timeout: the list
		// may be partial, so do not return it.
		err = opCtx.Err()
	}
	if err != nil {
		return nil, mapErr(ctx, err)
	}
	out := make([]Entry, len(hist))
	for i, e := range hist {
		out[i] = toEntry(e)
	}
	return out, nil
}

func (l *Link) mismatch(ctx context.Context, key string, expected uint64) error {
	e := &RevisionMismatchError{Key: key, Expected: expected}
	m, err := l.str.GetLastMsgForSubject(ctx, l.kvSubjPrefix+key)
	switch {
	case err == nil:
		e.Current, e.CurrentKnown = m.Sequence, true
	case errors.Is(err, jetstream.ErrMsgNotFound):
		e.CurrentKnown = true
	}
	return e
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// startWatch opens the first watcher (initial values) and waits until it
// has caught up, then hands it to watchLoop.
func (l *Link) startWatch(ctx context.Context) error {
	w, err := l.openWatcher(0)
	if err != nil {
		return err
	}
	synced := make(chan struct{})
	l.wg.Add(1)
	go l.watchLoop(w, synced)
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: initial config sync: %w", ErrUnavailable, ctx.Err())
	}
}

// openWatcher starts a watcher on every key: the latest value per key when
// from is 0, else every revision from `from` on. The consumer creation is
// bounded by ApplyTimeout; the watcher lives until l.ctx ends or Stop.
func (l *Link) openWatcher(from uint64) (jetstream.KeyWatcher, error) {
	if err := l.ready(); err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithCancel(l.ctx)
	timer := time.AfterFunc(l.cfg.ApplyTimeout, wcancel)
	opts := []jetstream.WatchOpt{}
	if from > 0 {
		opts = append(opts, jetstream.IncludeHistory(), jetstream.ResumeFromRevision(from))
	}
	w, err := l.kv.WatchAll(wctx, opts...)
	if !timer.Stop() || err != nil {
		wcancel()
		if err == nil {
			err = context.DeadlineExceeded
			stopWatcher(w)
		}
		return nil, fmt.Errorf("%w: watch %q from revision %d: %w", ErrUnavailable, l.cfg.Bucket, from, err)
	}
	return &cancelWatcher{w, wcancel}, nil
}

type cancelWatcher struct {
	jetstream.KeyWatcher
	cancel context.CancelFunc
}

func (c *cancelWatcher) Stop() error { c.cancel(); return c.KeyWatcher.Stop() }

// stopWatcher stops w and drains its channel so its delivery goroutine,
// which blocks on a full channel, can finish.
func stopWatcher(w jetstream.KeyWatcher) {
	if w == nil {
		return
	}
	_ = w.Stop()
	go func() {
		for range w.Updates() {
		}
	}()
}

// watchLoop delivers watch entries to OnConfig, deduplicated by revision.
// After a reconnect (or if the watcher ends by itself) it replaces the
// watcher with one resuming at the last delivered revision + 1, retrying
// every ReconnectWait until NATS and JetStream answer.
func (l *Link) watchLoop(w jetstream.KeyWatcher, synced chan struct{}) {
	defer l.wg.Done()
	var last uint64
	for {
		var updates <-chan jetstream.KeyValueEntry
		if w != nil {
			updates = w.Updates()
		}
		select {
		case <-l.ctx.Done():
			stopWatcher(w)
			return
		case <-l.reconnected:
			stopWatcher(w)
			w = nil
		case e, ok := <-updates:
			switch {
			case !ok:
				w = nil
			case e == nil: // caught up
				if synced != nil {
					close(synced)
					synced = nil
				}
			case e.Revision() > last:
				last = e.Revision()
				l.st.configUpdates.Add(1)
				l.callback(func() {
					l.h.OnConfig(e.Key(), e.Value(), e.Revision(), e.Operation() != jetstream.KeyValuePut)
				})
			}
		}
		for w == nil {
			var err error
			if w, err = l.openWatcher(last + 1); err == nil {
				l.st.watchRestarts.Add(1)
				break
			}
			if l.ctx.Err() != nil {
				return
			}
			if l.nc.IsConnected() {
				l.asyncErr(err)
			}
			select {
			case <-l.ctx.Done():
				return
			case <-l.reconnected:
			case <-time.After(l.cfg.ReconnectWait):
			}
		}
	}
}
