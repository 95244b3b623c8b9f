package prefixhash_test

import (
	"fmt"

	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// A gateway with a tokenizer hashes the prompt's token ids with the pool's
// seed and sends the result as PickRequest.prefix_hashes.
func ExampleTokens() {
	seed := prefixhash.Seed("llama-3-8b", "")
	prompt := make([]uint32, 40) // token ids from the model's tokenizer
	for i := range prompt {
		prompt[i] = uint32(1000 + i)
	}
	// Reuse one buffer per goroutine to avoid allocating per request.
	buf := make([]uint64, 0, prefixhash.MaxBlocks)
	hashes := prefixhash.Tokens(buf[:0], seed, prefixhash.DefaultBlockSize, prompt)
	fmt.Println(len(hashes), "hashes: 40 tokens = 2 full blocks of 16 + 8 unhashed")
	for _, h := range hashes {
		fmt.Printf("%#016x\n", h)
	}
	// A longer prompt with the same start shares the first hashes.
	longer := append(prompt, make([]uint32, 30)...)
	more := prefixhash.Tokens(nil, seed, prefixhash.DefaultBlockSize, longer)
	fmt.Println(len(more), more[0] == hashes[0] && more[1] == hashes[1])
	// Output:
	// 2 hashes: 40 tokens = 2 full blocks of 16 + 8 unhashed
	// 0x06f68abdf2a57867
	// 0xf9ec42be0b49d865
	// 4 true
}

// A gateway without a tokenizer hashes 64-byte chunks of the prompt's UTF-8
// bytes instead; a salt keeps one tenant's hashes apart from another's.
func ExampleText() {
	h := prefixhash.New("llama-3-8b", "tenant-a")
	prompt := "You are a helpful assistant. Answer concisely and cite sources.\n" +
		"Question: what is a prefix cache?"
	hashes := h.Text(nil, prompt)
	fmt.Println(len(prompt), "bytes:", len(hashes), "hash")
	fmt.Printf("%#016x\n", hashes[0])
	other := prefixhash.New("llama-3-8b", "tenant-b").Text(nil, prompt)
	fmt.Println(other[0] != hashes[0])
	// Output:
	// 97 bytes: 1 hash
	// 0x474cb98fe13def91
	// true
}
