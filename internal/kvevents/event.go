package kvevents

import (
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The decoding of one event, in the array (tagged) or the map form.

// Field order of the array encodings, after the tag (vLLM's and SGLang's
// struct field order).
var (
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name", "extra_keys", "group_idx"}
	removedFields = []string{"block_hashes", "medium", "group_idx"}
)

func (d *Decoder) eventArray(ev *Event) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	if n < 1 {
		return errors.New("empty event array; want a type tag first")
	}
	tag, err := d.dec.DecodeString()
	if err != nil {
		return fmt.Errorf("type tag: %v", err)
	}
	ev.Kind = kindOf(tag)
	var names []string
	switch ev.Kind {
	case KindStored:
		names = storedFields
		if n < 5 {
			return fmt.Errorf("BlockStored has %d fields; want at least block_hashes, parent_block_hash, token_ids, block_size", n-1)
		}
	case KindRemoved:
		names = removedFields
		if n < 2 {
			return errors.New("BlockRemoved has no block_hashes")
		}
	}
	for i := 1; i < n; i++ {
		if i-1 >= len(names) {
			if err := d.skip(1); err != nil {
				return err
			}
			continue
		}
		if err := d.field(ev, names[i-1]); err != nil {
			return err
		}
	}
	return nil
}

func (d *Decoder) eventMap(ev *Event) error {
	n, err := d.mapLen()
	if err != nil {
		return err
	}
	// "type" may come after the fields; decode the fields either way and
	// check that the ones the type needs were present.
	var seen [2]bool // block_hashes, block_size
	for range n {
		key, err := d.key()
		if err != nil {
			return err
		}
		switch key {
		case "type":
			tag, err := d.dec.DecodeString()
			if err != nil {
				return fmt.Errorf("type: %v", err)
			}
			ev.Kind = kindOf(tag)
			continue
		case "block_hashes":
			seen[0] = true
		case "block_size":
			seen[1] = true
		}
		if err := d.field(ev, key); err != nil {
			return err
		}
	}
	switch {
	case ev.Kind == KindStored && !(seen[0] && seen[1]):
		return errors.New("BlockStored map lacks block_hashes or block_size")
	case ev.Kind == KindRemoved && !seen[0]:
		return errors.New("BlockRemoved map lacks block_hashes")
	case ev.Kind != KindStored:
		// Fields of other kinds are not theirs to carry.
		hashes := ev.BlockHashes
		if ev.Kind != KindRemoved {
			hashes = hashes[:0]
		}
		*ev = Event{Kind: ev.Kind, BlockHashes: hashes, Medium: ev.Medium, Group: ev.Group, TokenIDs: ev.TokenIDs[:0]}
	}
	return nil
}

func kindOf(tag string) Kind {
	switch tag {
	case "BlockStored":
		return KindStored
	case "BlockRemoved":
		return KindRemoved
	case "AllBlocksCleared":
		return KindCleared
	}
	return KindOther
}

// field decodes the value of one named field into ev; unknown names are
// skipped.
func (d *Decoder) field(ev *Event, name string) error {
	var err error
	switch name {
	case "block_hashes":
		err = d.hashes(ev)
	case "parent_block_hash":
		if d.peek() == msgpcode.Nil {
			err = d.dec.DecodeNil()
		} else {
			ev.Parent, err = d.hash()
			ev.HasParent = err == nil
		}
	case "token_ids":
		err = d.tokens(ev)
	case "block_size":
		var v int64
		v, err = d.dec.DecodeInt64()
		if err == nil && (v <= 0 || v > math.MaxInt32) {
			err = fmt.Errorf("%d out of range", v)
		}
		ev.BlockSize = int(v)
	case "lora_id", "lora_name":
		if d.peek() == msgpcode.Nil {
			err = d.dec.DecodeNil()
		} else {
			ev.LoRA = true
			err = d.skip(1)
		}
	case "medium":
		if d.peek() == msgpcode.Nil {
			err = d.dec.DecodeNil()
		} else {
			ev.Medium, err = d.dec.DecodeString()
		}
	case "extra_keys":
		err = d.extraKeys(ev)
	case "group_idx":
		ev.Group, _, err = d.optInt()
	default:
		err = d.skip(1)
	}
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}
