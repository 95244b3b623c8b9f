// Package extproc is prefixrouted's Envoy external-processing endpoint
// picker: the gRPC service envoy.service.ext_proc.v3.ExternalProcessor as
// the Gateway API Inference Extension (GIE) specifies it for an endpoint
// picker (EPP, proposal 004-endpoint-picker-protocol). A gateway (Envoy,
// Istio, Envoy Gateway, kgateway, GKE Gateway, ...) opens one Process
// stream per HTTP request; the Processor reads the OpenAI-style body,
// turns it into a Pick through internal/gateway and Picker.PickFor (the
// one Pick entry point: metrics, span and decision log as for a gRPC
// Pick), and answers with the chosen "ip:port" and its fallbacks, both in
// the request header x-gateway-destination-endpoint and in the dynamic
// metadata envoy.lb / x-gateway-destination-endpoint.
//
// # Wire behaviour
//
//   - Request body mode FULL_DUPLEX_STREAMED (GIE's reference
//     configuration): the request headers are held, body chunks are
//     buffered until end_of_stream (or the request trailers), then the
//     headers phase is answered with the header mutation,
//     clear_route_cache and the dynamic metadata, and the body is streamed
//     back unchanged in chunks of at most BodyChunkBytes (62,000 bytes).
//   - BUFFERED (and BUFFERED_PARTIAL): the headers are answered at once
//     without a change; the decision goes on the request-body response.
//   - The mode is read from the stream's first message
//     (protocol_config.request_body_mode, sent by Envoy 1.34 and later);
//     without it Options.DefaultBodyMode applies. STREAMED, GRPC and NONE
//     cannot carry a decision made from the body: such a request is
//     answered 500 with reason unsupported_body_mode.
//   - A request without a body (headers with end_of_stream, GET
//     /v1/models) passes through untouched, as do request trailers and the
//     response phases (a FULL_DUPLEX_STREAMED response body is echoed
//     chunk by chunk). In any other response body mode (STREAMED, as
//     deploy/envoy/envoy.yaml sends it) the Processor answers the first
//     response body chunk, which gives the outcome its ttft, and ends the
//     stream cleanly: Envoy passes the rest of the body on without it.
//     The response phase's envoy.lb /
//     x-gateway-destination-endpoint-served, when it differs from the
//     chosen endpoint, is counted in prefixroute_extproc_served_mismatch_total,
//     logged, and written to the decision log (Picker.RecordServed).
//   - Each routed request's outcome is reported to the router in process
//     (frontend.OutcomeSink, outcome.go): served or upstream_error from the
//     response :status on the served endpoint, with the ttft to the first
//     response body chunk when the gateway sends the body.
//   - A subset hint, filter_metadata["envoy.lb.subset_hint"]
//     ["x-gateway-destination-endpoint-subset"] (a list of "ip:port" or
//     IPs), restricts the candidates: the pool's other instances are sent
//     as exclude_instances. An empty list, or a list matching no instance,
//     is answered 503; a complement larger than the router's exclude
//     limit (Picker.MaxExcludes, 1024 by default) is answered 500
//     with reason subset_exclude_limit rather than routed outside the
//     subset.
//   - A disaggregated pick (issue 30, docs/disaggregation.md) also sets
//     x-prefiller-host-port (the prefill instance's "ip:port", what
//     llm-d's decode-side routing sidecar reads) and
//     x-prefixroute-prefill-instance (its id); the destination is the
//     decode instance. A client's own x-prefiller-host-port never reaches
//     the upstream: it is replaced, or removed on a local pick.
//   - Errors are ImmediateResponses: the gateway.Error status, its
//     OpenAI-style JSON body and the x-prefixroute-reason header.
//   - A message out of order (a body before the headers, a body after end
//     of stream, headers twice, an empty message) ends the stream with
//     InvalidArgument naming it; the gateway then applies its
//     failure_mode_allow.
//
// # Dependencies
//
// The Processor depends on the frontend.Picker interface, which
// *server.Server implements; extproc imports frontend, never server or
// daemon. The daemon serves it as a frontend.GRPC on its own listener
// and grpc.Server, with the main listener's authorization (the gateway
// role), which FrontEnd builds; cmd/prefixrouted holds the flags. A
// Processor is safe for concurrent use: every stream has its own state.
package extproc
