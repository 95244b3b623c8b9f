package kvevents

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zeebo/xxh3"
)

func pack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, payload []byte) (Batch, error) {
	t.Helper()
	var b Batch
	err := NewDecoder().Decode(payload, &b)
	return b, err
}

// TestDecodeForms decodes the same events in each wire form the engines
// use, and checks the map form is not mistaken for an array.
func TestDecodeForms(t *testing.T) {
	tokens := []any{1, 2, 3, 4}
	sha := []byte("0123456789abcdef0123456789abcdef") // a 32-byte sha256 hash
	wantStored := Event{Kind: KindStored, BlockHashes: []uint64{11, 12}, Parent: 10, HasParent: true,
		TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2}
	for _, tc := range []struct {
		name    string
		payload any
		want    Batch
	}{
		{"sglang array", []any{1.5, []any{
			[]any{"BlockStored", []any{11, 12}, 10, tokens, 2, nil},
			[]any{"BlockRemoved", []any{11}},
			[]any{"AllBlocksCleared"},
		}}, Batch{TS: 1.5, Events: []Event{wantStored, {Kind: KindRemoved, BlockHashes: []uint64{11}}, {Kind: KindCleared}}}},
		{"vllm array with rank and trailing fields", []any{2.0, []any{
			[]any{"BlockStored", []any{11, 12}, 10, tokens, 2, nil, "GPU", nil, nil, 0, "full", nil, "future"},
			[]any{"BlockRemoved", []any{11}, "CPU"},
		}, 3}, Batch{TS: 2, DPRank: 3, HasDPRank: true, Events: []Event{
			func() Event { e := wantStored; e.Medium = "GPU"; return e }(),
			{Kind: KindRemoved, BlockHashes: []uint64{11}, Medium: "CPU"}}}},
		{"vllm map", map[string]any{"ts": 3.0, "data_parallel_rank": 0, "events": []any{
			map[string]any{"type": "BlockStored", "block_hashes": []any{sha}, "parent_block_hash": nil, "token_ids": []any{5, 6},
				"block_size": 2, "lora_id": nil, "medium": "GPU", "lora_name": "adapter-a", "extra_keys": []any{[]any{"salt"}}, "new_field": []any{1}},
			map[string]any{"type": "BlockRemoved", "block_hashes": []any{sha}, "medium": "GPU", "group_idx": 1},
			map[string]any{"type": "AllBlocksCleared"},
			map[string]any{"type": "SomethingNew", "x": 1},
		}}, Batch{TS: 3, HasDPRank: true, Map: true, Events: []Event{
			{Kind: KindStored, BlockHashes: []uint64{xxh3.Hash(sha)}, TokenIDs: []uint32{5, 6}, BlockSize: 2, Medium: "GPU", LoRA: true, ExtraKeys: []bool{true}},
			{Kind: KindRemoved, BlockHashes: []uint64{xxh3.Hash(sha)}, Medium: "GPU", Group: 1},
			{Kind: KindCleared}, {Kind: KindOther}}}},
		{"negative int hash", []any{0.0, []any{[]any{"BlockRemoved", []any{-1}}}},
			Batch{Events: []Event{{Kind: KindRemoved, BlockHashes: []uint64{^uint64(0)}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(t, pack(t, tc.payload))
			if err != nil {
				t.Fatal(err)
			}
			if !batchEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func batchEqual(a, b Batch) bool {
	if a.TS != b.TS || a.DPRank != b.DPRank || a.HasDPRank != b.HasDPRank || a.Map != b.Map || len(a.Events) != len(b.Events) {
		return false
	}
	for i := range a.Events {
		x, y := a.Events[i], b.Events[i]
		if x.Kind != y.Kind || !slices.Equal(x.BlockHashes, y.BlockHashes) || x.Parent != y.Parent || x.HasParent != y.HasParent ||
			!slices.Equal(x.TokenIDs, y.TokenIDs) || x.BlockSize != y.BlockSize || x.LoRA != y.LoRA || x.Medium != y.Medium ||
			!slices.Equal(x.ExtraKeys, y.ExtraKeys) || x.Group != y.Group {
			return false
		}
	}
	return true
}

// TestDecodeErrors: every malformed payload is refused with a reason.
func TestDecodeErrors(t *testing.T) {
	deep := []any{}
	for range MaxDepth + 2 {
		deep = []any{deep}
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"not a container", pack(t, 5), "neither an array nor a map"},
		{"short batch", pack(t, []any{1.0}), "want [ts, events"},
		{"events not array", pack(t, []any{1.0, "x"}), "where an array belongs"},
		{"map without events", pack(t, map[string]any{"ts": 1.0}), `no "events"`},
		{"stored too short", pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}}}}), "want at least"},
		{"bad hash", pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{1.5}}}}), "block hash"},
		{"negative token", pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{-3}, 1, nil}}}), "token id -3"},
		{"zero block size", pack(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{3}, 0, nil}}}), "block_size: 0 out of range"},
		{"map event lacks size", pack(t, []any{1.0, []any{map[string]any{"type": "BlockStored", "block_hashes": []any{1}}}}), "lacks"},
		{"too deep", pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{1}, nil, nil, deep}}}), "deeper"},
		{"trailing bytes", append(pack(t, []any{1.0, []any{}}), 0x01), "after the batch"},
		{"huge array length", []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff}, "elements in 0 bytes"},
		{"truncated", pack(t, []any{1.0, []any{[]any{"BlockRemoved", []any{1, 2, 3}}}})[:12], ""},
		{"too big", make([]byte, MaxPayloadBytes+1), "over the"},
	} {
		_, err := decode(t, tc.payload)
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrMalformed containing %q", tc.name, err, tc.want)
		}
	}
}

// TestParseFrames checks the message frames.
func TestParseFrames(t *testing.T) {
	seq := []byte{0, 0, 0, 0, 0, 0, 1, 2}
	m, err := parseFrames([][]byte{[]byte("kv"), seq, {0x90}}, true)
	if err != nil || m.Topic != "kv" || m.Seq != 258 || len(m.Payload) != 1 {
		t.Fatalf("got %+v, %v", m, err)
	}
	if m, err := parseFrames([][]byte{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {}}, false); err != nil || m.Seq != -1 {
		t.Fatalf("end marker: %+v, %v", m, err)
	}
	for _, frames := range [][][]byte{{seq, {}}, {[]byte("t"), seq[:7], {}}, {{}, seq, {}, {}}} {
		if _, err := parseFrames(frames, true); !errors.Is(err, ErrFrame) {
			t.Errorf("frames %q: %v, want ErrFrame", frames, err)
		}
	}
}

// FuzzDecode: no payload panics the decoder, and whatever decodes has
// consistent fields.
func FuzzDecode(f *testing.F) {
	f.Add(pack(f, []any{1.5, []any{[]any{"BlockStored", []any{11, 12}, 10, []any{1, 2, 3, 4}, 2, nil}, []any{"BlockRemoved", []any{11}}, []any{"AllBlocksCleared"}}}))
	f.Add(pack(f, map[string]any{"ts": 3.0, "events": []any{map[string]any{"type": "BlockStored", "block_hashes": []any{[]byte("ab")},
		"parent_block_hash": nil, "token_ids": []any{5, 6}, "block_size": 2, "extra_keys": []any{nil}}}}))
	d := NewDecoder()
	var b Batch
	f.Fuzz(func(t *testing.T, payload []byte) {
		if err := d.Decode(payload, &b); err != nil {
			return
		}
		for _, ev := range b.Events {
			if ev.Kind == KindStored && ev.BlockSize <= 0 {
				t.Fatalf("stored event with block size %d", ev.BlockSize)
			}
			if ev.Kind != KindStored && len(ev.TokenIDs) != 0 {
				t.Fatalf("%v event with tokens", ev.Kind)
			}
		}
	})
}

// BenchmarkDecode64 decodes a batch of one 64-block BlockStored (vLLM's
// array form, integer hashes, block size 16).
func BenchmarkDecode64(b *testing.B) {
	hashes, tokens := make([]any, 64), make([]any, 64*16)
	for i := range hashes {
		hashes[i] = uint64(1<<40 + i)
	}
	for i := range tokens {
		tokens[i] = 1000 + i
	}
	payload := pack(b, []any{1.0, []any{[]any{"BlockStored", hashes, nil, tokens, 16, nil, "GPU", nil}}, 0})
	d := NewDecoder()
	var batch Batch
	b.ReportAllocs()
	b.SetBytes(64)
	for b.Loop() {
		if err := d.Decode(payload, &batch); err != nil {
			b.Fatal(err)
		}
	}
}
