package prefixhash

import (
	"encoding/binary"
	"slices"
	"testing"
)

// FuzzTokens checks that Tokens never panics, appends exactly
// NumBlocks(len(tokens), blockSize) = min(len(tokens)/blockSize, MaxBlocks)
// hashes (none for blockSize <= 0), agrees with the naive definition and the
// portable encoding, and leaves dst's existing elements alone.
func FuzzTokens(f *testing.F) {
	f.Add(uint64(0), 16, []byte{})
	f.Add(uint64(1), 16, make([]byte, 4*16))
	f.Add(uint64(42), 1, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint64(7), 64, make([]byte, 4*130))
	f.Add(uint64(7), 0, make([]byte, 64))
	f.Add(uint64(7), -3, make([]byte, 64))
	f.Add(^uint64(0), 1<<62, make([]byte, 64))
	f.Fuzz(func(t *testing.T, seed uint64, blockSize int, raw []byte) {
		tokens := make([]uint32, len(raw)/4)
		for i := range tokens {
			tokens[i] = binary.LittleEndian.Uint32(raw[4*i:])
		}
		dst := []uint64{0xdead}
		got := Tokens(dst, seed, blockSize, tokens)
		want := 0
		if blockSize > 0 {
			want = min(len(tokens)/blockSize, MaxBlocks)
		}
		if len(got) != 1+want || got[0] != 0xdead {
			t.Fatalf("blockSize %d, %d tokens: %d hashes, want %d", blockSize, len(tokens), len(got)-1, want)
		}
		if !slices.Equal(got[1:], specTokens(seed, blockSize, tokens)) {
			t.Fatal("differs from the naive definition")
		}
		withLittleEndian(t, false, func() {
			if !slices.Equal(Tokens(nil, seed, blockSize, tokens), got[1:]) {
				t.Fatal("portable encoding differs")
			}
		})
	})
}

// FuzzText checks that Text never panics and appends
// NumBlocks(len(text), chunkBytes) hashes whose prefix property holds.
func FuzzText(f *testing.F) {
	f.Add(uint64(0), 64, "")
	f.Add(uint64(1), 4, "héllo, 世界 🙂")
	f.Add(uint64(2), 0, "abc")
	f.Add(uint64(3), -1, "abc")
	f.Fuzz(func(t *testing.T, seed uint64, chunkBytes int, text string) {
		got := Text(nil, seed, chunkBytes, text)
		want := 0
		if chunkBytes > 0 {
			want = min(len(text)/chunkBytes, MaxBlocks)
		}
		if len(got) != want {
			t.Fatalf("chunkBytes %d, %d bytes: %d hashes, want %d", chunkBytes, len(text), len(got), want)
		}
		if len(text) > 0 {
			shorter := Text(nil, seed, chunkBytes, text[:len(text)-1])
			if !slices.Equal(shorter, got[:len(shorter)]) {
				t.Fatal("a prefix of the text does not give a prefix of the hashes")
			}
		}
	})
}
