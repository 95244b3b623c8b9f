// Package prefixhash turns a prompt into the chained block hashes that
// prefixroute matches against the instances' prefix (KV) caches.
//
// Gateways hash a prompt and send the result as PickRequest.prefix_hashes;
// model-server instances hash the blocks they store or evict and send them as
// KV-cache events; the router compares the two lists hash by hash. Both sides
// must therefore compute the same values bit for bit, in whatever language
// they are written. The exact byte-level definition is the specification in
// this package's README.md; testdata/vectors.json holds test vectors that any
// implementation must reproduce, and testdata/reference.py is an independent
// Python implementation that checks them. This package is the Go
// implementation of that specification.
//
// # The scheme in one paragraph
//
// A pool (model) name and an optional salt (for tenant isolation) give a
// 64-bit seed (Seed). The prompt's token ids are cut into full blocks of
// blockSize tokens; a trailing partial block is ignored. Block k is hashed
// with XXH3-64 over the little-endian uint32 bytes of its token ids, seeded
// with the hash of block k-1 (block 0 is seeded with the pool seed):
//
//	h_0 = XXH3_64(seed,    LE32(t_0) || ... || LE32(t_{B-1}))
//	h_k = XXH3_64(h_{k-1}, LE32(t_{kB}) || ... || LE32(t_{kB+B-1}))
//
// so h_k identifies the whole prefix of k+1 blocks, and two prompts that share
// their first k+1 blocks share h_0..h_k. Text mode (Text), for gateways
// without a tokenizer, applies the same chaining to fixed-size chunks of the
// prompt's UTF-8 bytes, starting from a seed derived from the pool seed with a
// text-mode tag, so text hashes and token hashes never describe the same
// input. At most MaxBlocks hashes are produced per prompt.
//
// # Choosing a mode
//
// Token mode is the one that can match an instance's KV-cache events, because
// an instance knows token ids, not the prompt text: use it whenever the
// gateway can tokenize, with blockSize equal to the instances' KV block size
// (DefaultBlockSize is vLLM's default). Text mode only ever matches other
// text-mode hashes, i.e. the router's own record of where it sent earlier
// requests (optimistic accounting); it is the fallback for gateways that
// cannot tokenize. A pool must use one mode and one block size everywhere.
//
// # Incremental hashing
//
// Because the chain value is the seed of the next block, a gateway that has
// the hashes of a conversation's earlier turns can hash only the new blocks:
// Tokens(dst, last, blockSize, newTokens), where last is the previous list's
// final hash and newTokens starts on a block boundary, appends exactly the
// hashes that hashing the whole prompt would have produced after last (the
// MaxBlocks limit then applies to each call, so the caller caps the total).
//
// # Bad input and concurrency
//
// No function panics on any input: a block or chunk size <= 0 yields no
// hashes (dst is returned unchanged), as does an input shorter than one
// block. Every function is safe for concurrent use; none keeps a reference to
// its arguments. When dst has capacity for the result, Tokens and Text do not
// allocate.
package prefixhash
