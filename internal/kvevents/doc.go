// Package kvevents decodes and receives the KV-cache events that vLLM and
// SGLang publish over ZeroMQ, exactly as their publishers put them on the
// wire.
//
// # Wire format (read from the sources)
//
// vLLM vllm/distributed/kv_events.py (vllm-project/vllm at 0181ea3173e5,
// and the array form of its earlier releases) and SGLang
// python/sglang/srt/disaggregation/kv_events.py (sgl-project/sglang at
// 006d053f182f) share one publisher design, ZmqEventPublisher: a PUB socket
// that binds when its endpoint holds "*", "::", ipc:// or inproc:// and
// connects otherwise, and an optional ROUTER replay socket. Every message
// has three frames:
//
//	topic (bytes, "" by default) | seq (8-byte big-endian) | payload (msgpack)
//
// seq counts from 0 per publisher process and grows by one per message. A
// data-parallel rank r publishes on the endpoint's port + r. The payload is
// an event batch encoded by msgspec, in one of two forms:
//
//   - array_like (SGLang; vLLM before its structs lost array_like):
//     [ts, events] or [ts, events, data_parallel_rank], and each event a
//     tagged array whose first element is the class name:
//     ["BlockStored", block_hashes, parent_block_hash, token_ids,
//     block_size, lora_id, medium, lora_name, extra_keys, group_idx, ...],
//     ["BlockRemoved", block_hashes, medium, group_idx],
//     ["AllBlocksCleared"]. Trailing fields may be absent (omit_defaults;
//     SGLang's BlockStored ends at lora_id and its BlockRemoved at
//     block_hashes).
//   - map (vLLM at 0181ea3173e5): {"ts", "events", "data_parallel_rank"},
//     each event {"type": "BlockStored", "block_hashes": ..., ...} with the
//     same field names.
//
// Decode detects the form from the msgpack type byte of each value (never
// by decoding a map as an array, which msgpack libraries accept with zero
// fields), ignores fields and event types it does not know, and returns an
// error for anything malformed. Block hashes arrive as integers (SGLang;
// vLLM's builtin hash) or byte strings (vLLM's sha256 hashes); an integer
// is kept as its 64-bit pattern, a byte string becomes its XXH3-64 (the
// engine hash is only ever a map key here; two distinct engine hashes
// collide with probability 2^-64).
//
// The replay socket takes a request of one frame, the start seq as 8-byte
// big-endian, from a DEALER (behind the ROUTER's identity and an empty
// delimiter frame) and answers with (seq, payload) messages for every
// buffered batch from that seq on, then (-1, "").
//
// # Limits and concurrency
//
// A payload larger than MaxPayloadBytes (16 MiB) is refused. No array or
// map length may exceed the bytes left in the payload, so a hostile length
// never allocates. A Decoder is not safe for concurrent use; a Subscriber's
// methods are, except that Recv must be called from one goroutine.
package kvevents
