package prefixhash

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/zeebo/xxh3"
)

const (
	// DefaultBlockSize is the default number of tokens per block: 16, vLLM's
	// default KV block size. A gateway should use the block size of the
	// instances it routes to, so that its blocks are the instances' blocks.
	DefaultBlockSize = 16

	// DefaultTextChunkBytes is the default number of prompt bytes per chunk
	// in text mode: 64. BPE tokenizers average about 4 bytes of English text
	// per token, so a 64-byte chunk covers about as much of the prompt as a
	// DefaultBlockSize block of tokens, which keeps the router's hit ratios
	// of text-mode and token-mode pools comparable; and 64 bytes is one of
	// XXH3's short-input paths, so hashing costs a few nanoseconds a chunk.
	DefaultTextChunkBytes = 64

	// MaxBlocks is the most hashes Tokens and Text produce for one call:
	// 8192, the router's default max_prefix_blocks. Hashing stops after the
	// MaxBlocks-th full block; the rest of a longer prompt (more than
	// 131072 tokens at DefaultBlockSize) is not hashed. A router configured
	// with a smaller max_prefix_blocks ignores the excess hashes.
	MaxBlocks = 8192
)

// Domain tags of the specification (README.md). Their length, 30 bytes, is
// not a multiple of 4, so neither can be the bytes of a token block.
const (
	seedTag = "prefixroute/prefixhash/v1/seed"
	textTag = "prefixroute/prefixhash/v1/text"
)

// Seed returns the pool seed of a pool (model) name and a salt: the value
// that Tokens and Text start their chains from. Requests that should share
// cache hits must use the same pool and salt; a distinct salt per tenant
// gives each tenant hashes that never match another tenant's. The salt may
// be empty. Seed is
//
//	XXH3_64(0, "prefixroute/prefixhash/v1/seed" || LE64(len(pool)) || pool || LE64(len(salt)) || salt)
//
// over the strings' bytes (UTF-8), lengths in bytes. It is safe for
// concurrent use and allocates only for inputs longer than 256 bytes.
func Seed(pool, salt string) uint64 {
	n := len(seedTag) + 8 + len(pool) + 8 + len(salt)
	var stack [256]byte
	var msg []byte
	if n <= len(stack) {
		msg = stack[:0]
	} else {
		msg = make([]byte, 0, n)
	}
	msg = append(msg, seedTag...)
	msg = binary.LittleEndian.AppendUint64(msg, uint64(len(pool)))
	msg = append(msg, pool...)
	msg = binary.LittleEndian.AppendUint64(msg, uint64(len(salt)))
	msg = append(msg, salt...)
	return xxh3.HashSeed(msg, 0)
}

// textSeed returns the seed of the first text-mode chunk for a pool seed.
func textSeed(seed uint64) uint64 {
	return xxh3.HashStringSeed(textTag, seed)
}

// NumBlocks returns how many hashes Tokens appends for n tokens with the
// given block size, or Text for n bytes with the given chunk size:
// n/size (full blocks only), capped at MaxBlocks, and 0 when size <= 0 or
// n <= 0. It is safe for concurrent use.
func NumBlocks(n, size int) int {
	if size <= 0 || n <= 0 {
		return 0
	}
	return min(n/size, MaxBlocks)
}

// Tokens appends the chained hashes of the full blocks of blockSize tokens
// to dst and returns the extended slice: h_0 = XXH3_64(seed, bytes of block
// 0), h_k = XXH3_64(h_{k-1}, bytes of block k), where the bytes of a block are
// its token ids as little-endian uint32s. seed is normally Seed(pool, salt);
// it may also be the last hash of an earlier call, to continue that chain
// (see the package documentation).
//
// A trailing partial block yields no hash, and at most MaxBlocks hashes are
// appended (NumBlocks(len(tokens), blockSize)). A blockSize <= 0 yields no
// hashes: dst is returned unchanged. Tokens never panics, does not allocate
// when dst has enough spare capacity, does not keep tokens, and is safe for
// concurrent use (as long as no one writes tokens or dst meanwhile).
func Tokens(dst []uint64, seed uint64, blockSize int, tokens []uint32) []uint64 {
	n := NumBlocks(len(tokens), blockSize)
	if n == 0 {
		return dst
	}
	dst = slices.Grow(dst, n)
	if littleEndian {
		return tokensLE(dst, seed, blockSize, tokens[:n*blockSize])
	}
	return tokensPortable(dst, seed, blockSize, tokens[:n*blockSize])
}

// Text appends the chained hashes of the full chunks of chunkBytes bytes of
// text to dst and returns the extended slice. text is hashed as the bytes it
// holds (normally the prompt's UTF-8 encoding, not normalised), and a chunk
// boundary may fall inside a multi-byte character. The chain starts from
// XXH3_64(seed, "prefixroute/prefixhash/v1/text") instead of seed, so text
// hashes never coincide with token hashes of the same pool by construction:
// h_0 = XXH3_64(textSeed, chunk 0), h_k = XXH3_64(h_{k-1}, chunk k).
//
// A trailing partial chunk yields no hash, and at most MaxBlocks hashes are
// appended (NumBlocks(len(text), chunkBytes)). A chunkBytes <= 0 yields no
// hashes: dst is returned unchanged. Text never panics, does not allocate
// when dst has enough spare capacity, and is safe for concurrent use.
func Text(dst []uint64, seed uint64, chunkBytes int, text string) []uint64 {
	n := NumBlocks(len(text), chunkBytes)
	if n == 0 {
		return dst
	}
	dst = slices.Grow(dst, n)
	h := textSeed(seed)
	for off := 0; n > 0; n-- {
		h = xxh3.HashStringSeed(text[off:off+chunkBytes], h)
		dst = append(dst, h)
		off += chunkBytes
	}
	return dst
}

// Hasher holds the hashing parameters of one pool (and tenant), so that call
// sites need not repeat them. A Hasher is a small value: copy it freely. Its
// methods are safe for concurrent use.
type Hasher struct {
	// Seed is the pool seed, normally Seed(pool, salt).
	Seed uint64
	// BlockSize is the number of tokens per block; 0 means
	// DefaultBlockSize, and a negative value makes Tokens produce no hashes.
	BlockSize int
	// TextChunkBytes is the number of bytes per text-mode chunk; 0 means
	// DefaultTextChunkBytes, and a negative value makes Text produce no
	// hashes.
	TextChunkBytes int
}

// New returns the Hasher of a pool and salt with the default block and chunk
// sizes: Hasher{Seed: Seed(pool, salt)}.
func New(pool, salt string) Hasher {
	return Hasher{Seed: Seed(pool, salt)}
}

// Tokens is Tokens(dst, h.Seed, h.BlockSize, tokens), with 0 meaning
// DefaultBlockSize.
func (h Hasher) Tokens(dst []uint64, tokens []uint32) []uint64 {
	return Tokens(dst, h.Seed, h.blockSize(), tokens)
}

// Text is Text(dst, h.Seed, h.TextChunkBytes, text), with 0 meaning
// DefaultTextChunkBytes.
func (h Hasher) Text(dst []uint64, text string) []uint64 {
	return Text(dst, h.Seed, h.textChunkBytes(), text)
}

func (h Hasher) blockSize() int {
	if h.BlockSize == 0 {
		return DefaultBlockSize
	}
	return h.BlockSize
}

func (h Hasher) textChunkBytes() int {
	if h.TextChunkBytes == 0 {
		return DefaultTextChunkBytes
	}
	return h.TextChunkBytes
}

// littleEndian reports whether uint32s are stored little-endian, in which
// case a block's token ids already are its bytes in memory and tokensLE
// hashes them in place. It is a variable so that tests can run the portable
// path on little-endian machines too.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// tokensLE hashes every full block of tokens, whose length is a multiple of
// blockSize, in place: on a little-endian machine the memory of tokens is the
// byte string the specification hashes.
func tokensLE(dst []uint64, seed uint64, blockSize int, tokens []uint32) []uint64 {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(tokens))), 4*len(tokens))
	step := 4 * blockSize
	h := seed
	for off := 0; off < len(b); off += step {
		h = xxh3.HashSeed(b[off:off+step], h)
		dst = append(dst, h)
	}
	return dst
}

// portableStack is the largest block, in bytes, that tokensPortable encodes
// on the stack; larger blocks get one heap buffer per call.
const portableStack = 1024

// tokensPortable is tokensLE for any byte order: it encodes each block into a
// buffer before hashing it.
func tokensPortable(dst []uint64, seed uint64, blockSize int, tokens []uint32) []uint64 {
	var stack [portableStack]byte
	step := 4 * blockSize
	var buf []byte
	if step <= len(stack) {
		buf = stack[:step]
	} else {
		buf = make([]byte, step)
	}
	h := seed
	for len(tokens) > 0 {
		for i, t := range tokens[:blockSize] {
			binary.LittleEndian.PutUint32(buf[4*i:], t)
		}
		tokens = tokens[blockSize:]
		h = xxh3.HashSeed(buf, h)
		dst = append(dst, h)
	}
	return dst
}
