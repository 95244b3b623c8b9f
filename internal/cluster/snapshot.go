package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Snapshot chunk stream headers (see doc.go for the protocol).
const (
	headerChunk  = "Prefixroute-Chunk"  // 0-based index of this chunk
	headerChunks = "Prefixroute-Chunks" // number of chunks
	headerSize   = "Prefixroute-Size"   // total snapshot bytes
	headerCRC    = "Prefixroute-Crc32c" // CRC-32C of the whole snapshot
	headerError  = "Prefixroute-Error"  // the responder's handler failed
	ackNext      = "next"
	ackDone      = "done"
	ackCancel    = "cancel"
	// maxSnapshotBytes bounds what a requester accepts (and allocates).
	maxSnapshotBytes = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ServeSnapshots makes this replica answer snapshot requests from other
// replicas with fn(pool); nil stops answering. fn runs on its own
// goroutine per request (at most 4 at once; more requests are ignored
// and left to other replicas) and should answer within SnapshotTimeout. An
// error from fn is reported to the requester, which keeps waiting for
// another replica. Calling it again replaces the handler. The
// subscription is live at the server when it returns.
func (l *Link) ServeSnapshots(fn func(pool string) ([]byte, error)) error {
	if l.closed.Load() {
		return ErrClosed
	}
	l.snapMu.Lock()
	defer l.snapMu.Unlock()
	if l.snapSub != nil {
		_ = l.snapSub.Unsubscribe()
		l.snapSub = nil
	}
	if fn == nil {
		return nil
	}
	sub, err := l.nc.Subscribe(l.snapPrefix+"*", func(m *nats.Msg) {
		l.cbMu.RLock() // Close waits for this, so wg.Add never races wg.Wait
		defer l.cbMu.RUnlock()
		if l.closed.Load() {
			return
		}
		select {
		case l.snapSem <- struct{}{}:
		default:
			return
		}
		l.wg.Add(1)
		go func() {
			defer func() { <-l.snapSem; l.wg.Done() }()
			l.serveSnapshot(m, fn)
		}()
	})
	if err != nil {
		return fmt.Errorf("%w: subscribe snapshots: %w", ErrUnavailable, err)
	}
	l.snapSub = sub
	if err := l.nc.FlushTimeout(l.cfg.ApplyTimeout); err != nil { // live on return
		return fmt.Errorf("%w: subscribe snapshots: %w", ErrUnavailable, err)
	}
	return nil
}

func (l *Link) serveSnapshot(req *nats.Msg, fn func(string) ([]byte, error)) {
	if req.Reply == "" || req.Header.Get(HeaderOrigin) == l.cfg.Name || l.closed.Load() {
		return
	}
	pool, err := DecodeToken(req.Subject[len(l.snapPrefix):])
	var data []byte
	if err == nil {
		data, err = fn(pool)
	}
	if err != nil {
		msg := nats.NewMsg(req.Reply)
		msg.Header.Set(HeaderOrigin, l.cfg.Name)
		msg.Header.Set(headerError, strings.ReplaceAll(err.Error(), "\n", " "))
		_ = l.nc.PublishMsg(msg)
		return
	}
	chunk := l.maxMsg
	n := max(1, (len(data)+chunk-1)/chunk)
	crc := strconv.FormatUint(uint64(crc32.Checksum(data, castagnoli)), 10)
	for i := 0; i < n; i++ {
		msg := nats.NewMsg(req.Reply)
		msg.Data = data[i*chunk : min(len(data), (i+1)*chunk)]
		msg.Header.Set(HeaderOrigin, l.cfg.Name)
		msg.Header.Set(headerChunk, strconv.Itoa(i))
		msg.Header.Set(headerChunks, strconv.Itoa(n))
		msg.Header.Set(headerSize, strconv.Itoa(len(data)))
		msg.Header.Set(headerCRC, crc)
		ctx, cancel := context.WithTimeout(l.ctx, l.cfg.ApplyTimeout)
		ack, err := l.nc.RequestMsgWithContext(ctx, msg)
		cancel()
		if err != nil || string(ack.Data) != ackNext {
			if err == nil && string(ack.Data) == ackDone {
				l.st.snapServed.Add(1)
			}
			return // done, cancelled (another replica won), or requester gone
		}
	}
}

// RequestSnapshot asks the other replicas for pool's snapshot and returns
// the first complete answer and the answering replica's Name. Every
// replica serving snapshots may start answering; the requester keeps the
// first whose chunk 0 arrives and cancels the others after their first
// chunk. It fails with ErrNoPeers when no replica serves snapshots or
// none answered within SnapshotTimeout (wrapping the handlers' errors, if
// any), with ErrUnavailable when disconnected or when the chosen replica
// stalls for ApplyTimeout mid-stream. ctx bounds the whole transfer.
func (l *Link) RequestSnapshot(ctx context.Context, pool string) ([]byte, string, error) {
	if err := l.ready(); err != nil {
		return nil, "", err
	}
	l.st.snapRequested.Add(1)
	inbox := l.nc.NewInbox()
	sub, err := l.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	req := nats.NewMsg(l.snapPrefix + EncodeToken(pool))
	req.Reply = inbox
	req.Header.Set(HeaderOrigin, l.cfg.Name)
	if err := l.nc.PublishMsg(req); err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var (
		chosen   string
		buf      []byte
		next     int
		chunks   int
		size     int
		crc      string
		peerErrs []error
	)
	for {
		wait := l.cfg.ApplyTimeout
		if chosen == "" && len(peerErrs) == 0 {
			// The peer exports its view first. Once one peer has answered
			// with an error, the others get ApplyTimeout to do better.
			wait = l.cfg.SnapshotTimeout
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, "", ctx.Err()
		case errors.Is(err, nats.ErrNoResponders) && chosen == "":
			// The server's no-responders status: nobody (else) subscribed.
			return nil, "", fmt.Errorf("%w for pool %q: no replica serves snapshots", ErrNoPeers, pool)
		case err != nil && chosen == "" && l.nc.IsConnected():
			return nil, "", noPeers(pool, l.cfg.SnapshotTimeout, peerErrs)
		case err != nil:
			return nil, "", fmt.Errorf("%w: snapshot stream for pool %q from %q: %w", ErrUnavailable, pool, chosen, err)
		case m.Header.Get("Status") != "":
			continue // other status messages are not ours to act on
		case m.Header.Get(headerError) != "":
			peerErrs = append(peerErrs, fmt.Errorf("%s: %s", m.Header.Get(HeaderOrigin), m.Header.Get(headerError)))
			continue
		}
		origin := m.Header.Get(HeaderOrigin)
		idx, _ := strconv.Atoi(m.Header.Get(headerChunk))
		if chosen == "" && idx == 0 {
			chunks, _ = strconv.Atoi(m.Header.Get(headerChunks))
			size, _ = strconv.Atoi(m.Header.Get(headerSize))
			crc = m.Header.Get(headerCRC)
			if chunks < 1 || size < 0 || size > maxSnapshotBytes {
				_ = m.Respond([]byte(ackCancel))
				continue
			}
			chosen, buf = origin, make([]byte, 0, size)
		} else if origin != chosen {
			_ = m.Respond([]byte(ackCancel))
			continue
		}
		if idx != next || len(buf)+len(m.Data) > size {
			_ = m.Respond([]byte(ackCancel))
			return nil, "", fmt.Errorf("%w: snapshot stream for pool %q from %q: got chunk %d, want %d", ErrUnavailable, pool, chosen, idx, next)
		}
		buf = append(buf, m.Data...)
		next++
		if next < chunks {
			_ = m.Respond([]byte(ackNext))
			continue
		}
		_ = m.Respond([]byte(ackDone))
		if len(buf) != size || strconv.FormatUint(uint64(crc32.Checksum(buf, castagnoli)), 10) != crc {
			return nil, "", fmt.Errorf("%w: snapshot for pool %q from %q failed its size/CRC check", ErrUnavailable, pool, chosen)
		}
		return buf, chosen, nil
	}
}

func noPeers(pool string, d time.Duration, peerErrs []error) error {
	err := fmt.Errorf("%w for pool %q within %v", ErrNoPeers, pool, d)
	if len(peerErrs) > 0 {
		err = fmt.Errorf("%w (%d replica(s) failed: %w)", err, len(peerErrs), errors.Join(peerErrs...))
	}
	return err
}
