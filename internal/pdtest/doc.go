// Package pdtest holds the end-to-end test of prefill/decode
// disaggregation (issue 30) on loopback: a real prefixrouted (in
// process), engine stand-ins that report their role and serve the OpenAI
// completions API with vLLM NixlConnector's kv_transfer_params contract,
// and a stand-in of llm-d's decode-side routing sidecar that reads
// x-prefiller-host-port and runs the prefill leg, then the decode leg,
// as its connector_nixlv2.go does. The test plays the gateway: it asks
// /v1/route (nginx's auth_request idiom) and forwards the request with
// the answer's headers.
//
// The stand-ins are test harnesses, not products: they keep their KV
// "blocks" in memory and move them over an HTTP side channel where NIXL
// would use RDMA. Their types are safe for concurrent use.
package pdtest
