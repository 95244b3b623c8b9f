package cluster

import (
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
)

// tokenEncoding is base32 "extended hex" (0-9, A-V) without padding: it
// keeps the sort order and needs no character NATS treats specially.
var tokenEncoding = base32.HexEncoding.WithPadding(base32.NoPadding)

// EncodeToken maps any string (a pool name, say) to a string that is a
// valid NATS subject token and a valid KV key. Names made only of ASCII
// letters, digits, '-' and '_' are kept as they are, so subjects stay
// readable; anything else (empty, dots, spaces, unicode, ...) becomes
// "=" followed by the unpadded base32hex (RFC 4648, 0-9A-V) encoding of
// its bytes. Plain names never contain '=', so the mapping is reversible.
func EncodeToken(s string) string {
	if isPlainToken(s) {
		return s
	}
	return "=" + tokenEncoding.EncodeToString([]byte(s))
}

// DecodeToken reverses EncodeToken.
func DecodeToken(tok string) (string, error) {
	if len(tok) > 0 && tok[0] == '=' {
		b, err := tokenEncoding.DecodeString(tok[1:])
		if err != nil {
			return "", fmt.Errorf("cluster: bad token %q: %w", tok, err)
		}
		return string(b), nil
	}
	if !isPlainToken(tok) {
		return "", fmt.Errorf("cluster: bad token %q", tok)
	}
	return tok, nil
}

func isPlainToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Batch framing: a batch message's data is a sequence of frames, each
// uvarint(len(payload)) followed by payload. Nothing else: no count, no
// trailer, so a batch is exactly as long as its frames.

// appendFrame appends one frame to b.
func appendFrame(b, payload []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

var errBadFrame = errors.New("cluster: malformed event batch")

// splitFrames appends the payloads framed in data to dst (sub-slices of
// data, not copies).
func splitFrames(dst [][]byte, data []byte) ([][]byte, error) {
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)-k) {
			return dst, errBadFrame
		}
		data = data[k:]
		dst = append(dst, data[:n:n])
		data = data[n:]
	}
	return dst, nil
}

// batch is one pool's events on their way out.
type batch struct {
	pool   string
	buf    []byte
	events int
}

// outbox holds the open batch of each pool and the FIFO of sealed batches
// waiting for the sender. Its size is bounded by maxPending bytes; when a
// seal would exceed it, the oldest sealed batches are dropped.
type outbox struct {
	mu         sync.Mutex
	open       map[string]*batch
	queue      []*batch // sealed, oldest first, from head
	head       int
	queued     int // bytes in queue[head:]
	free       []*batch
	armed      bool
	stopped    bool
	timer      *time.Timer
	interval   time.Duration
	maxBatch   int
	maxPending int
	onSeal     func() // called (without mu) after batches were sealed

	droppedBatches, droppedEvents, droppedBytes uint64 // under mu
}

func (o *outbox) init(maxBatch, maxPending int, interval time.Duration, onSeal func()) {
	o.open = make(map[string]*batch)
	o.maxBatch, o.maxPending, o.interval, o.onSeal = maxBatch, maxPending, interval, onSeal
	o.timer = time.AfterFunc(time.Hour, o.flushTimer)
	o.timer.Stop()
}

// add frames payload into pool's open batch. need is the frame size.
func (o *outbox) add(pool string, payload []byte, need int) error {
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		return ErrClosed
	}
	sealed := false
	b := o.open[pool]
	if b != nil && len(b.buf)+need > o.maxBatch {
		o.sealLocked(b)
		b, sealed = nil, true
	}
	if b == nil {
		b = o.newBatch(pool)
		o.open[pool] = b
	}
	b.buf = appendFrame(b.buf, payload)
	b.events++
	if len(b.buf) >= o.maxBatch {
		o.sealLocked(b)
		sealed = true
	} else if !o.armed {
		o.armed = true
		o.timer.Reset(o.interval)
	}
	o.mu.Unlock()
	if sealed {
		o.onSeal()
	}
	return nil
}

func (o *outbox) newBatch(pool string) *batch {
	if n := len(o.free); n > 0 {
		b := o.free[n-1]
		o.free = o.free[:n-1]
		b.pool = pool
		return b
	}
	return &batch{pool: pool, buf: make([]byte, 0, min(o.maxBatch, 4<<10))}
}

// recycle returns b's buffer for reuse; buffers that grew far past
// maxBatch (a single oversized event) are left to the GC.
func (o *outbox) recycle(b *batch) {
	o.mu.Lock()
	o.recycleLocked(b)
	o.mu.Unlock()
}

func (o *outbox) recycleLocked(b *batch) {
	if cap(b.buf) <= 2*o.maxBatch && len(o.free) < 64 {
		b.buf, b.events, b.pool = b.buf[:0], 0, ""
		o.free = append(o.free, b)
	}
}

func (o *outbox) sealLocked(b *batch) {
	delete(o.open, b.pool)
	o.queue = append(o.queue, b)
	o.queued += len(b.buf)
	for o.queued > o.maxPending && len(o.queue)-o.head > 1 {
		old := o.queue[o.head]
		o.queue[o.head] = nil
		o.head++
		o.queued -= len(old.buf)
		o.droppedBatches++
		o.droppedEvents += uint64(old.events)
		o.droppedBytes += uint64(len(old.buf))
		o.recycleLocked(old)
	}
	if o.head > 64 && o.head*2 > len(o.queue) { // compact
		n := copy(o.queue, o.queue[o.head:])
		clear(o.queue[n:])
		o.queue, o.head = o.queue[:n], 0
	}
}

// sealAll seals every open batch; it reports whether any was sealed.
func (o *outbox) sealAll() bool {
	o.mu.Lock()
	n := len(o.open)
	for _, b := range o.open {
		o.sealLocked(b)
	}
	o.mu.Unlock()
	return n > 0
}

func (o *outbox) flushTimer() {
	o.mu.Lock()
	o.armed = false
	o.mu.Unlock()
	if o.sealAll() {
		o.onSeal()
	}
}

// pop removes the oldest sealed batch, or returns nil.
func (o *outbox) pop() *batch {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.head == len(o.queue) {
		o.queue, o.head = o.queue[:0], 0
		return nil
	}
	b := o.queue[o.head]
	o.queue[o.head] = nil
	o.head++
	o.queued -= len(b.buf)
	return b
}

// pushFront puts back a batch that could not be sent, as the oldest.
func (o *outbox) pushFront(b *batch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.head > 0 {
		o.head--
		o.queue[o.head] = b
	} else {
		o.queue = append([]*batch{b}, o.queue...)
	}
	o.queued += len(b.buf)
}

// pending returns the bytes in open and sealed batches.
func (o *outbox) pending() (open, sealed int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.open {
		open += len(b.buf)
	}
	return open, o.queued
}

// stop refuses further adds and stops the timer.
func (o *outbox) stop() {
	o.mu.Lock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
	}
	o.mu.Unlock()
}
