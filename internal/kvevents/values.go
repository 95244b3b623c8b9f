package kvevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
	"github.com/zeebo/xxh3"
)

// The value readers of Decoder: each checks a length against the bytes
// left before using it, so no hostile length allocates.

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

// peek returns the next type byte, or Nil's complement at the end (an
// invalid code that every reader rejects).
func (d *Decoder) peek() byte {
	c, err := d.dec.PeekCode()
	if err != nil {
		return 0xc1 // never used by msgpack
	}
	return c
}

func (d *Decoder) arrayLen() (int, error) {
	if c := d.peek(); !isArray(c) {
		return 0, fmt.Errorf("msgpack type 0x%02x where an array belongs", c)
	}
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n > d.r.Len() {
		return 0, fmt.Errorf("array of %d elements in %d bytes", n, d.r.Len())
	}
	return n, nil
}

func (d *Decoder) mapLen() (int, error) {
	if c := d.peek(); !isMap(c) {
		return 0, fmt.Errorf("msgpack type 0x%02x where a map belongs", c)
	}
	n, err := d.dec.DecodeMapLen()
	if err != nil {
		return 0, err
	}
	if 2*n > d.r.Len() {
		return 0, fmt.Errorf("map of %d entries in %d bytes", n, d.r.Len())
	}
	return n, nil
}

func (d *Decoder) key() (string, error) {
	if c := d.peek(); !msgpcode.IsString(c) {
		return "", fmt.Errorf("map key of msgpack type 0x%02x, not a string", c)
	}
	return d.dec.DecodeString()
}

// optInt decodes an integer or nil.
func (d *Decoder) optInt() (int64, bool, error) {
	if d.peek() == msgpcode.Nil {
		return 0, false, d.dec.DecodeNil()
	}
	v, err := d.int()
	return v, err == nil, err
}

func (d *Decoder) int() (int64, error) {
	c := d.peek()
	if !msgpcode.IsFixedNum(c) && (c < msgpcode.Uint8 || c > msgpcode.Int64) {
		return 0, fmt.Errorf("msgpack type 0x%02x where an integer belongs", c)
	}
	if c == msgpcode.Uint64 {
		u, err := d.dec.DecodeUint64()
		if err == nil && u > math.MaxInt64 {
			return 0, fmt.Errorf("integer %d out of range", u)
		}
		return int64(u), err
	}
	return d.dec.DecodeInt64()
}

// hash decodes one block hash: an integer's 64-bit pattern, or the XXH3-64
// of a byte string.
func (d *Decoder) hash() (uint64, error) {
	c := d.peek()
	switch {
	case msgpcode.IsBin(c) || msgpcode.IsString(c):
		n, err := d.dec.DecodeBytesLen()
		if err != nil {
			return 0, err
		}
		if n < 0 || n > d.r.Len() {
			return 0, fmt.Errorf("hash of %d bytes in %d", n, d.r.Len())
		}
		// bytes.Reader has no zero-copy read; hash through a stack buffer.
		var buf [64]byte
		if n <= len(buf) {
			if _, err := d.r.Read(buf[:n]); err != nil && n > 0 {
				return 0, err
			}
			return xxh3.Hash(buf[:n]), nil
		}
		b := make([]byte, n)
		if _, err := d.r.Read(b); err != nil {
			return 0, err
		}
		return xxh3.Hash(b), nil
	case c == msgpcode.Uint64:
		return d.dec.DecodeUint64()
	case msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Int64):
		v, err := d.dec.DecodeInt64()
		return uint64(v), err
	}
	return 0, fmt.Errorf("msgpack type 0x%02x where a block hash (integer or bytes) belongs", c)
}

// seek moves the reader to pos, an offset within d.buf. bytes.Reader's Seek
// fails only for a negative offset, which pos never is.
func (d *Decoder) seek(pos int) { _, _ = d.r.Seek(int64(pos), io.SeekStart) }

func (d *Decoder) hashes(ev *Event) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	ev.BlockHashes = slices.Grow(ev.BlockHashes, n)
	for i := range n {
		if pos := len(d.buf) - d.r.Len(); pos+9 <= len(d.buf) && d.buf[pos] == msgpcode.Uint64 {
			ev.BlockHashes = append(ev.BlockHashes, binary.BigEndian.Uint64(d.buf[pos+1:]))
			d.seek(pos + 9)
			continue
		}
		h, err := d.hash()
		if err != nil {
			return fmt.Errorf("[%d]: %v", i, err)
		}
		ev.BlockHashes = append(ev.BlockHashes, h)
	}
	return nil
}

func (d *Decoder) tokens(ev *Event) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	ev.TokenIDs = slices.Grow(ev.TokenIDs, n)
	pos := len(d.buf) - d.r.Len()
	for i := range n {
		v, next, ok := fastUint(d.buf, pos)
		if !ok {
			// Not a short non-negative integer: the general path, which
			// says what is wrong.
			d.seek(pos)
			w, err := d.int()
			if err != nil {
				return fmt.Errorf("[%d]: %v", i, err)
			}
			if w < 0 || w > math.MaxUint32 {
				return fmt.Errorf("[%d]: token id %d out of range", i, w)
			}
			v, next = uint64(w), len(d.buf)-d.r.Len()
		}
		ev.TokenIDs = append(ev.TokenIDs, uint32(v))
		pos = next
	}
	d.seek(pos)
	return nil
}

// fastUint decodes a msgpack positive fixint, uint8, uint16 or uint32 at
// b[pos:], returning the value and the position after it; ok is false for
// any other code or a truncated value.
func fastUint(b []byte, pos int) (v uint64, next int, ok bool) {
	if pos >= len(b) {
		return 0, pos, false
	}
	switch c := b[pos]; {
	case c <= msgpcode.PosFixedNumHigh:
		return uint64(c), pos + 1, true
	case c == msgpcode.Uint8 && pos+2 <= len(b):
		return uint64(b[pos+1]), pos + 2, true
	case c == msgpcode.Uint16 && pos+3 <= len(b):
		return uint64(binary.BigEndian.Uint16(b[pos+1:])), pos + 3, true
	case c == msgpcode.Uint32 && pos+5 <= len(b):
		return uint64(binary.BigEndian.Uint32(b[pos+1:])), pos + 5, true
	}
	return 0, pos, false
}

// extraKeys decodes extra_keys: nil, or one entry per block, each nil or a
// tuple of keys; only whether an entry is set matters here.
func (d *Decoder) extraKeys(ev *Event) error {
	if d.peek() == msgpcode.Nil {
		return d.dec.DecodeNil()
	}
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	if ev.ExtraKeys == nil {
		ev.ExtraKeys = make([]bool, 0, n)
	}
	for range n {
		set := d.peek() != msgpcode.Nil
		if err := d.skip(1); err != nil {
			return err
		}
		ev.ExtraKeys = append(ev.ExtraKeys, set)
	}
	return nil
}

var errTooDeep = errors.New("value nested deeper than MaxDepth")

// skip skips one value of any type, containers to at most MaxDepth levels.
func (d *Decoder) skip(depth int) error {
	if depth > MaxDepth {
		return errTooDeep
	}
	c := d.peek()
	switch {
	case isArray(c):
		n, err := d.arrayLen()
		if err != nil {
			return err
		}
		return d.skipN(n, depth+1)
	case isMap(c):
		n, err := d.mapLen()
		if err != nil {
			return err
		}
		return d.skipN(2*n, depth+1)
	}
	return d.dec.Skip()
}

func (d *Decoder) skipN(n, depth int) error {
	for range n {
		if err := d.skip(depth); err != nil {
			return err
		}
	}
	return nil
}
