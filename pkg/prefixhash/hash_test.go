package prefixhash

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// seq returns n token ids from a fixed pseudo-random sequence.
func seq(n int) []uint32 {
	t := make([]uint32, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range t {
		x = x*6364136223846793005 + 1442695040888963407
		t[i] = uint32(x >> 33)
	}
	return t
}

// specTokens is the specification's definition, written out naively.
func specTokens(seed uint64, blockSize int, tokens []uint32) []uint64 {
	var out []uint64
	h := seed
	for k := 0; blockSize > 0 && (k+1)*blockSize <= len(tokens) && k < MaxBlocks; k++ {
		var b []byte
		for _, t := range tokens[k*blockSize : (k+1)*blockSize] {
			b = binary.LittleEndian.AppendUint32(b, t)
		}
		h = xxh3.HashSeed(b, h)
		out = append(out, h)
	}
	return out
}

func TestTokensTable(t *testing.T) {
	seed := Seed("llama-3-8b", "")
	toks := seq(1000)
	for _, tc := range []struct {
		name      string
		blockSize int
		n         int // tokens
		want      int // hashes
	}{
		{"empty", 16, 0, 0},
		{"partial block", 16, 15, 0},
		{"one block", 16, 16, 1},
		{"one block and a bit", 16, 17, 1},
		{"several blocks", 16, 50, 3},
		{"block size 1", 1, 7, 7},
		{"block size 64", 64, 130, 2},
		{"block size 64, exact", 64, 192, 3},
		{"block size 300, past the portable stack buffer", 300, 1000, 3},
		{"block size larger than prompt", 1 << 40, 192, 0},
		{"block size 0", 0, 32, 0},
		{"negative block size", -16, 32, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, le := range []bool{true, false} {
				withLittleEndian(t, le, func() {
					got := Tokens(nil, seed, tc.blockSize, toks[:tc.n])
					if len(got) != tc.want || len(got) != NumBlocks(tc.n, tc.blockSize) {
						t.Fatalf("in-place %v: %d hashes, want %d", le, len(got), tc.want)
					}
					if want := specTokens(seed, tc.blockSize, toks[:tc.n]); !slices.Equal(got, want) {
						t.Fatalf("in-place %v: %x, want %x", le, got, want)
					}
				})
			}
		})
	}
}

func TestTokensAppends(t *testing.T) {
	seed := Seed("p", "")
	prefix := []uint64{1, 2, 3}
	got := Tokens(slices.Clone(prefix), seed, 4, seq(12))
	if !slices.Equal(got[:3], prefix) || len(got) != 6 {
		t.Fatalf("got %x", got)
	}
	if !slices.Equal(got[3:], Tokens(nil, seed, 4, seq(12))) {
		t.Fatal("appended hashes differ from a fresh call")
	}
	if got := Tokens(prefix, seed, 0, seq(12)); !slices.Equal(got, prefix) {
		t.Fatal("block size 0 changed dst")
	}
}

func TestMaxBlocks(t *testing.T) {
	seed := Seed("p", "")
	toks := seq(MaxBlocks*2 + 5)
	got := Tokens(nil, seed, 1, toks)
	if len(got) != MaxBlocks {
		t.Fatalf("tokens: %d hashes, want MaxBlocks", len(got))
	}
	if !slices.Equal(got, Tokens(nil, seed, 1, toks[:MaxBlocks])) {
		t.Fatal("tokens past the cap changed the hashes")
	}
	text := strings.Repeat("x", 2*MaxBlocks+1)
	if got := Text(nil, seed, 2, text); len(got) != MaxBlocks {
		t.Fatalf("text: %d hashes, want MaxBlocks", len(got))
	}
	if NumBlocks(MaxBlocks*16+15, 16) != MaxBlocks || NumBlocks(-1, 16) != 0 {
		t.Fatal("NumBlocks")
	}
}

// TestChaining: a prompt that extends another shares its hashes as a prefix,
// diverges from the first block that differs, and can be continued from its
// last hash.
func TestChaining(t *testing.T) {
	seed := Seed("llama-3-8b", "")
	for _, bs := range []int{1, 16, 64} {
		long := seq(10 * bs)
		short := Tokens(nil, seed, bs, long[:4*bs+bs/2])
		full := Tokens(nil, seed, bs, long)
		if len(short) != 4 || !slices.Equal(full[:4], short) {
			t.Fatalf("bs %d: %x is not a prefix of %x", bs, short, full)
		}
		cont := Tokens(nil, short[3], bs, long[4*bs:])
		if !slices.Equal(cont, full[4:]) {
			t.Fatalf("bs %d: continuing from the last hash differs", bs)
		}
		edited := slices.Clone(long)
		edited[6*bs] ^= 1
		e := Tokens(nil, seed, bs, edited)
		if !slices.Equal(e[:6], full[:6]) {
			t.Fatalf("bs %d: blocks before the edit changed", bs)
		}
		for k := 6; k < len(e); k++ {
			if e[k] == full[k] {
				t.Fatalf("bs %d: hash %d survived an edit of block 6", bs, k)
			}
		}
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	short := Text(nil, seed, 64, text[:300])
	full := Text(nil, seed, 64, text)
	if len(short) != 4 || !slices.Equal(full[:4], short) {
		t.Fatal("text: not a prefix")
	}
}

func TestSaltIsolation(t *testing.T) {
	toks := seq(64)
	text := strings.Repeat("shared system prompt ", 10)
	seeds := map[uint64]string{}
	hashes := map[uint64]string{}
	for _, ps := range [][2]string{
		{"llama-3-8b", ""}, {"llama-3-8b", "tenant-a"}, {"llama-3-8b", "tenant-b"},
		{"llama-3-70b", ""}, {"llama-3-70b", "tenant-a"},
		{"ab", ""}, {"a", "b"}, {"", "ab"}, {"", ""},
	} {
		name := ps[0] + "|" + ps[1]
		s := Seed(ps[0], ps[1])
		if other, ok := seeds[s]; ok {
			t.Fatalf("Seed(%s) == Seed(%s)", name, other)
		}
		seeds[s] = name
		for _, h := range append(Tokens(nil, s, 16, toks), Text(nil, s, 64, text)...) {
			if other, ok := hashes[h]; ok {
				t.Fatalf("pool/salt %s shares hash %#x with %s", name, h, other)
			}
			hashes[h] = name
		}
	}
}

// TestDomainSeparation: text whose bytes are exactly a token block's bytes
// does not hash like that block.
func TestDomainSeparation(t *testing.T) {
	seed := Seed("llama-3-8b", "")
	toks := seq(64)
	var b []byte
	for _, x := range toks {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	for _, bs := range []int{1, 16, 64} {
		th := Tokens(nil, seed, bs, toks)
		xh := Text(nil, seed, 4*bs, string(b))
		if len(th) != len(xh) {
			t.Fatalf("bs %d: %d token hashes, %d text hashes", bs, len(th), len(xh))
		}
		for k := range th {
			if th[k] == xh[k] {
				t.Fatalf("bs %d: hash %d is the same in both modes", bs, k)
			}
		}
	}
	if textSeed(seed) == seed {
		t.Fatal("text seed equals the pool seed")
	}
}

func TestTextMultiByte(t *testing.T) {
	seed := Seed("p", "")
	s := "前缀缓存🙂é" // 3*4 + 4 + 2 = 18 bytes
	got := Text(nil, seed, 5, s)
	if len(got) != 3 {
		t.Fatalf("%d hashes, want 3 (18 bytes / 5)", len(got))
	}
	h := textSeed(seed)
	for k := range got {
		h = xxh3.HashSeed([]byte(s)[5*k:5*k+5], h)
		if got[k] != h {
			t.Fatalf("chunk %d: %#x, want %#x", k, got[k], h)
		}
	}
}

func TestHasher(t *testing.T) {
	toks := seq(100)
	text := strings.Repeat("abc", 100)
	h := New("llama-3-8b", "t")
	if h.Seed != Seed("llama-3-8b", "t") {
		t.Fatal("New: seed")
	}
	if !slices.Equal(h.Tokens(nil, toks), Tokens(nil, h.Seed, DefaultBlockSize, toks)) {
		t.Fatal("Hasher.Tokens: default block size")
	}
	if !slices.Equal(h.Text(nil, text), Text(nil, h.Seed, DefaultTextChunkBytes, text)) {
		t.Fatal("Hasher.Text: default chunk size")
	}
	h.BlockSize, h.TextChunkBytes = 4, 7
	if !slices.Equal(h.Tokens(nil, toks), Tokens(nil, h.Seed, 4, toks)) ||
		!slices.Equal(h.Text(nil, text), Text(nil, h.Seed, 7, text)) {
		t.Fatal("Hasher: explicit sizes")
	}
	h.BlockSize, h.TextChunkBytes = -1, -1
	if len(h.Tokens(nil, toks)) != 0 || len(h.Text(nil, text)) != 0 {
		t.Fatal("Hasher: negative sizes must give no hashes")
	}
}

func TestNoAllocs(t *testing.T) {
	seed := Seed("llama-3-8b", "")
	toks := seq(8192)
	text := strings.Repeat("x", 32<<10)
	dst := make([]uint64, 0, MaxBlocks)
	for name, fn := range map[string]func(){
		"tokens 16":          func() { dst = Tokens(dst[:0], seed, 16, toks) },
		"tokens 64":          func() { dst = Tokens(dst[:0], seed, 64, toks) },
		"tokens 256":         func() { dst = Tokens(dst[:0], seed, 256, toks) },
		"tokens 16 portable": func() { withLittleEndian(t, false, func() { dst = Tokens(dst[:0], seed, 16, toks) }) },
		"text 64":            func() { dst = Text(dst[:0], seed, 64, text) },
		"seed":               func() { seed = Seed("llama-3-8b", "tenant-a") },
	} {
		if n := testing.AllocsPerRun(20, fn); n != 0 {
			t.Errorf("%s: %v allocations per call", name, n)
		}
	}
}

func TestSeedLongInputs(t *testing.T) {
	long := strings.Repeat("p", 300) // past Seed's stack buffer
	var msg []byte
	msg = append(msg, seedTag...)
	msg = binary.LittleEndian.AppendUint64(msg, 300)
	msg = append(msg, long...)
	msg = binary.LittleEndian.AppendUint64(msg, 1)
	msg = append(msg, 's')
	if got, want := Seed(long, "s"), xxh3.HashSeed(msg, 0); got != want {
		t.Fatalf("Seed = %#x, want %#x", got, want)
	}
}
