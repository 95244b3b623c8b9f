package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Header names set on event batches and snapshot messages.
const (
	// HeaderOrigin carries the sending replica's Name.
	HeaderOrigin = "Prefixroute-Origin"
	// HeaderSentAt carries the send time of an event batch, Unix
	// nanoseconds in decimal.
	HeaderSentAt = "Prefixroute-Sent-At"
)

// Publish queues payload for the other replicas watching pool and returns
// at once: it never waits for the network. Events are batched per pool
// and sent as one message on "<prefix>.events.<EncodeToken(pool)>" when
// the batch reaches MaxBatchBytes or FlushInterval after its first event.
// payload is copied. While NATS is unreachable batches wait in a buffer
// of MaxPendingBytes; beyond that the oldest are dropped (Stats counts
// them). Errors: ErrClosed, ErrTooLarge (payload plus its 1-10 byte
// length prefix over the server's max_payload minus 8 KiB).
func (l *Link) Publish(pool string, payload []byte) error {
	need := uvarintLen(len(payload)) + len(payload)
	if need > l.maxMsg {
		return fmt.Errorf("%w: %d bytes (max %d)", ErrTooLarge, len(payload), l.maxMsg)
	}
	return l.out.add(pool, payload, need)
}

func uvarintLen(n int) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}

// sealed is the outbox's callback: wake the sender.
func (l *Link) sealed() { signal(l.wake) }

// sendLoop hands sealed batches to NATS in order, one goroutine, so each
// origin's batches arrive in the order they were sealed. While the
// connection is down it leaves them queued (the outbox bounds them).
func (l *Link) sendLoop() {
	defer l.wg.Done()
	hdr := nats.Header{HeaderOrigin: []string{l.cfg.Name}, HeaderSentAt: []string{""}}
	msg := &nats.Msg{Header: hdr}
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.wake:
		}
		for l.nc.IsConnected() {
			l.sending.Store(true) // before pop, so Flush never sees neither
			b := l.out.pop()
			if b == nil {
				l.sending.Store(false)
				break
			}
			msg.Subject = l.eventsPrefix + EncodeToken(b.pool)
			msg.Data = b.buf
			hdr[HeaderSentAt][0] = strconv.FormatInt(time.Now().UnixNano(), 10)
			err := l.nc.PublishMsg(msg) // copies the data into the write buffer
			if err != nil {             // disconnected meanwhile: retry after reconnect
				l.out.pushFront(b)
				l.sending.Store(false)
				break
			}
			l.st.pubBatches.Add(1)
			l.st.pubEvents.Add(uint64(b.events))
			l.st.pubBytes.Add(uint64(len(b.buf)))
			l.out.recycle(b)
			l.sending.Store(false)
		}
	}
}

// Flush sends every buffered event now and waits until NATS has
// received them (a round trip to the server), or ctx is done. It returns
// ErrUnavailable while disconnected.
func (l *Link) Flush(ctx context.Context) error {
	if err := l.ready(); err != nil {
		return err
	}
	return l.flush(ctx)
}

func (l *Link) flush(ctx context.Context) error {
	l.out.sealAll()
	signal(l.wake)
	for {
		if _, sealed := l.out.pending(); sealed == 0 && !l.sending.Load() {
			break
		}
		if !sleepCtx(ctx, 200*time.Microsecond) {
			return ctx.Err()
		}
		if !l.nc.IsConnected() {
			return fmt.Errorf("%w: %s", ErrUnavailable, l.nc.Status())
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.cfg.ApplyTimeout)
		defer cancel()
	}
	if err := l.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("%w: flush: %w", ErrUnavailable, err)
	}
	return nil
}

// onEventMsg runs on the events subscription's goroutine (one message at
// a time), so recvBuf can be reused.
func (l *Link) onEventMsg(m *nats.Msg) {
	origin := m.Header.Get(HeaderOrigin)
	if origin == l.cfg.Name {
		l.st.selfDropped.Add(1)
		return
	}
	pool, err := DecodeToken(m.Subject[len(l.eventsPrefix):])
	if err != nil {
		l.st.malformed.Add(1)
		l.asyncErr(fmt.Errorf("cluster: event batch from %q on %q: %w", origin, m.Subject, err))
		return
	}
	now := time.Now()
	var sentAt time.Time
	if ns, err := strconv.ParseInt(m.Header.Get(HeaderSentAt), 10, 64); err == nil {
		sentAt = time.Unix(0, ns)
		l.st.lag.observe(now.Sub(sentAt))
	}
	payloads, err := splitFrames(l.recvBuf[:0], m.Data)
	l.recvBuf = payloads[:0]
	if err != nil {
		l.st.malformed.Add(1)
		l.asyncErr(fmt.Errorf("cluster: event batch from %q for pool %q: %w", origin, pool, err))
		return
	}
	l.st.recvBatches.Add(1)
	l.st.recvEvents.Add(uint64(len(payloads)))
	l.st.recvBytes.Add(uint64(len(m.Data)))
	l.callback(func() { l.h.OnEvents(pool, origin, sentAt, payloads) })
	clear(payloads) // do not pin the message data through recvBuf
}
