package kvevents

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Limits of the decoder.
const (
	// MaxPayloadBytes is the largest payload Decode accepts: 16 MiB. A
	// 64-block BlockStored batch of vLLM is about 4 KiB.
	MaxPayloadBytes = 16 << 20
	// MaxDepth is the deepest nesting of a value Decode skips (an unknown
	// field's value): 32.
	MaxDepth = 32
)

// ErrMalformed is wrapped by every error Decode returns for a payload that
// is not an event batch.
var ErrMalformed = errors.New("malformed KV event batch")

// Kind is an event's type.
type Kind uint8

// The event kinds. KindOther is an event type this package does not know;
// it carries no fields and should be ignored (and counted).
const (
	KindOther Kind = iota
	KindStored
	KindRemoved
	KindCleared
)

// String returns the engine's name of the kind.
func (k Kind) String() string {
	switch k {
	case KindStored:
		return "BlockStored"
	case KindRemoved:
		return "BlockRemoved"
	case KindCleared:
		return "AllBlocksCleared"
	}
	return "other"
}

// Event is one decoded KV-cache event. Fields that the event's kind does not
// have are zero.
type Event struct {
	Kind Kind
	// BlockHashes are the engine's hashes of the blocks, as 64-bit keys
	// (see the package documentation for byte-string hashes).
	BlockHashes []uint64
	// Parent is the engine hash of the block before BlockHashes[0]; valid
	// when HasParent (a chain that starts at the prompt's first block has
	// none).
	Parent    uint64
	HasParent bool
	// TokenIDs are the tokens of the stored blocks, BlockSize per block.
	TokenIDs  []uint32
	BlockSize int
	// LoRA is true when the blocks belong to a LoRA adapter (lora_id or
	// lora_name set).
	LoRA bool
	// Medium is the storage tier ("GPU", "CPU", ...); "" when the engine
	// sent none (GPU).
	Medium string
	// ExtraKeys[i] is true when block i's engine hash covers more than its
	// tokens (multimodal inputs, cache_salt...). Nil when the engine sent
	// no extra_keys.
	ExtraKeys []bool
	// Group is the KV-cache group (group_idx) of hybrid models; 0 when
	// absent.
	Group int64
}

// Batch is one decoded message payload.
type Batch struct {
	TS float64
	// DPRank is the publisher's data-parallel rank; valid when HasDPRank.
	DPRank    int64
	HasDPRank bool
	Events    []Event
	// Map is true when the payload used the map encoding (vLLM's current
	// structs), false for the array encoding.
	Map bool
}

// Decoder decodes payloads; it keeps buffers between calls. The zero value
// is not usable: call NewDecoder. A Decoder is not safe for concurrent use.
type Decoder struct {
	buf []byte // the payload being decoded
	r   bytes.Reader
	dec *msgpack.Decoder
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	d := &Decoder{}
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}

// Decode decodes payload into b, reusing b's slices. On error b holds a
// partial batch that must not be used. The error wraps ErrMalformed.
func (d *Decoder) Decode(payload []byte, b *Batch) error {
	if len(payload) > MaxPayloadBytes {
		return fmt.Errorf("%w: payload of %d bytes over the %d-byte limit", ErrMalformed, len(payload), MaxPayloadBytes)
	}
	d.buf = payload
	d.r.Reset(payload)
	d.dec.Reset(&d.r)
	b.TS, b.DPRank, b.HasDPRank, b.Map = 0, 0, false, false
	b.Events = b.Events[:0]
	var err error
	switch c := d.peek(); {
	case isArray(c):
		err = d.batchArray(b)
	case isMap(c):
		b.Map = true
		err = d.batchMap(b)
	default:
		err = fmt.Errorf("batch is msgpack type 0x%02x, neither an array nor a map", c)
	}
	if err == nil && d.r.Len() != 0 {
		err = fmt.Errorf("%d bytes after the batch", d.r.Len())
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

func (d *Decoder) batchArray(b *Batch) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	if n < 2 {
		return fmt.Errorf("batch array has %d fields; want [ts, events, ...]", n)
	}
	if b.TS, err = d.dec.DecodeFloat64(); err != nil {
		return fmt.Errorf("ts: %v", err)
	}
	if err := d.events(b); err != nil {
		return err
	}
	if n >= 3 {
		if b.DPRank, b.HasDPRank, err = d.optInt(); err != nil {
			return fmt.Errorf("data_parallel_rank: %v", err)
		}
	}
	return d.skipN(n-3, 1)
}

func (d *Decoder) batchMap(b *Batch) error {
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	sawEvents := false
	for range n {
		key, err := d.key()
		if err != nil {
			return err
		}
		switch key {
		case "ts":
			if b.TS, err = d.dec.DecodeFloat64(); err != nil {
				return fmt.Errorf("ts: %v", err)
			}
		case "events":
			sawEvents = true
			err = d.events(b)
		case "data_parallel_rank":
			if b.DPRank, b.HasDPRank, err = d.optInt(); err != nil {
				return fmt.Errorf("data_parallel_rank: %v", err)
			}
		default:
			err = d.skip(1)
		}
		if err != nil {
			return err
		}
	}
	if !sawEvents {
		return errors.New(`batch map has no "events"`)
	}
	return nil
}

// events decodes the events array into b.Events, reusing its elements.
func (d *Decoder) events(b *Batch) error {
	n, err := d.arrayLen()
	if err != nil {
		return fmt.Errorf("events: %v", err)
	}
	for i := range n {
		if len(b.Events) < cap(b.Events) {
			b.Events = b.Events[:len(b.Events)+1]
		} else {
			b.Events = append(b.Events, Event{})
		}
		ev := &b.Events[len(b.Events)-1]
		*ev = Event{BlockHashes: ev.BlockHashes[:0], TokenIDs: ev.TokenIDs[:0], ExtraKeys: ev.ExtraKeys[:0]}
		switch c := d.peek(); {
		case isArray(c):
			err = d.eventArray(ev)
		case isMap(c):
			err = d.eventMap(ev)
		default:
			err = fmt.Errorf("msgpack type 0x%02x, neither an array nor a map", c)
		}
		if err != nil {
			return fmt.Errorf("event %d: %v", i, err)
		}
		if ev.ExtraKeys != nil && len(ev.ExtraKeys) == 0 {
			ev.ExtraKeys = nil
		}
	}
	return nil
}
