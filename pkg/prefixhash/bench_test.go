package prefixhash

import (
	"fmt"
	"strings"
	"testing"
)

// benchPromptTokens is the prompt length of the token benchmarks: 8k tokens.
const benchPromptTokens = 8192

// benchTextBytes is the prompt length of the text benchmark: 32 KiB, about
// 8k tokens of English.
const benchTextBytes = 32 << 10

// reportPerBlock adds an ns/block metric next to ns/op and MB/s.
func reportPerBlock(b *testing.B, blocks int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(blocks), "ns/block")
}

// BenchmarkTokens hashes an 8k-token prompt; SetBytes counts its 4-byte
// token ids, so MB/s is the rate over the bytes actually hashed.
func BenchmarkTokens(b *testing.B) {
	seed := Seed("llama-3-8b", "")
	toks := seq(benchPromptTokens)
	dst := make([]uint64, 0, MaxBlocks)
	for _, bs := range []int{16, 64} {
		for _, path := range []struct {
			name string
			le   bool
		}{{"", true}, {"/portable", false}} {
			b.Run(fmt.Sprintf("block=%d%s", bs, path.name), func(b *testing.B) {
				withLittleEndian(b, path.le, func() {
					b.SetBytes(4 * benchPromptTokens)
					b.ReportAllocs()
					for b.Loop() {
						dst = Tokens(dst[:0], seed, bs, toks)
					}
					reportPerBlock(b, benchPromptTokens/bs)
				})
			})
		}
	}
}

// BenchmarkText hashes a 32 KiB prompt in 64-byte chunks.
func BenchmarkText(b *testing.B) {
	seed := Seed("llama-3-8b", "")
	text := strings.Repeat("The quick brown fox jumps over the lazy dog; ", benchTextBytes/45+1)[:benchTextBytes]
	dst := make([]uint64, 0, MaxBlocks)
	b.Run(fmt.Sprintf("chunk=%d", DefaultTextChunkBytes), func(b *testing.B) {
		b.SetBytes(benchTextBytes)
		b.ReportAllocs()
		for b.Loop() {
			dst = Text(dst[:0], seed, DefaultTextChunkBytes, text)
		}
		reportPerBlock(b, benchTextBytes/DefaultTextChunkBytes)
	})
}

// BenchmarkSeed derives a pool seed, which a gateway does once per pool and
// tenant, or per request if it does not cache it.
func BenchmarkSeed(b *testing.B) {
	b.ReportAllocs()
	var s uint64
	for b.Loop() {
		s += Seed("meta-llama/Llama-3.1-8B-Instruct", "tenant-0042")
	}
	_ = s
}
