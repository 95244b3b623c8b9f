package extproc

import (
	"context"
	"fmt"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// spanName is the span of one ext_proc pick.
const spanName = "prefixroute.extproc/Pick"

// phase is where a stream is in its HTTP request.
type phase uint8

const (
	awaitHeaders phase = iota // nothing received yet
	inBody                    // request headers received, body expected
	requestDone               // the request side is answered (decided or passed through)
)

// stream is one Process call's state: one HTTP request. Not shared.
type stream struct {
	p        *Processor
	srv      extprocv3.ExternalProcessor_ProcessServer
	ctx      context.Context
	first    bool // no message received yet
	reqMode  procmode.ProcessingMode_BodySendMode
	respMode procmode.ProcessingMode_BodySendMode
	phase    phase
	start    time.Time
	headers  []*corev3.HeaderValue
	path     string
	subset   []string // the subset hint's entries
	hasHint  bool     // the gateway sent a subset hint (maybe empty)
	body     []byte   // the request body so far (body.go)
	charged  int      // bytes of body charged to the daemon-wide budget
	chosen   string   // the chosen endpoint once decided
	pool     string
	reqID    string
	served   bool         // the served endpoint was checked
	out      outcomeState // the outcome to report (outcome.go)
}

func newStream(p *Processor, srv extprocv3.ExternalProcessor_ProcessServer) *stream {
	return &stream{p: p, srv: srv, ctx: srv.Context(), first: true, reqMode: p.mode, respMode: p.mode}
}

// protocolError ends the stream with InvalidArgument.
func (s *stream) protocolError(format string, args ...any) (bool, error) {
	msg := fmt.Sprintf(format, args...)
	s.p.met.protocolError(s.ctx)
	s.p.log.Info("ext_proc protocol error; ending the stream", "err", msg, "request_id", s.reqID)
	return true, status.Error(codes.InvalidArgument, "ext_proc: "+msg)
}

// handle processes one message. done ends the stream (after an immediate
// response, or with err).
func (s *stream) handle(req *extprocv3.ProcessingRequest) (done bool, err error) {
	if s.first {
		s.first = false
		if pc := req.GetProtocolConfig(); pc != nil {
			s.reqMode, s.respMode = pc.GetRequestBodyMode(), pc.GetResponseBodyMode()
		}
	}
	switch r := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return s.requestHeaders(req, r.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return s.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return s.requestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		s.checkServed(req)
		s.responseHeadersSeen(req, r.ResponseHeaders)
		return false, s.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{}}})
	case *extprocv3.ProcessingRequest_ResponseBody:
		s.checkServed(req)
		s.responseBodySeen()
		if err := s.responseBody(r.ResponseBody); err != nil {
			return true, err
		}
		// The first chunk gave the ttft: nothing after it is needed. Out
		// of FULL_DUPLEX_STREAMED (where Envoy keeps no copy of the body
		// and every chunk must come back) the stream ends here, cleanly,
		// and Envoy passes the rest of the body on without asking
		// (ext_proc protocol: a clean close means "proceed without the
		// server"); mode_override cannot do it, as Envoy ignores it in a
		// body response.
		return s.respMode != procmode.ProcessingMode_FULL_DUPLEX_STREAMED, nil
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		s.checkServed(req)
		return false, s.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{}}})
	}
	return s.protocolError("a ProcessingRequest without request_headers, request_body, request_trailers, response_headers, response_body or response_trailers")
}

func (s *stream) send(resp *extprocv3.ProcessingResponse) error { return s.srv.Send(resp) }

// requestHeaders records the headers and, unless the body is awaited in
// FULL_DUPLEX_STREAMED mode, answers them.
func (s *stream) requestHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) (bool, error) {
	if s.phase != awaitHeaders {
		return s.protocolError("request_headers received twice")
	}
	s.start = time.Now()
	s.headers = h.GetHeaders().GetHeaders()
	s.path = s.header(":path")
	s.reqID = s.header(gateway.RequestIDHeader)
	s.readSubset(req)
	passthrough := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: s.removeSpoofed()}}}
	if h.GetEndOfStream() {
		s.phase = requestDone
		s.p.met.request(s.ctx, resultPassthrough)
		return false, s.send(passthrough)
	}
	s.phase = inBody
	switch s.reqMode {
	case procmode.ProcessingMode_FULL_DUPLEX_STREAMED:
		return false, nil // answered with the decision
	case procmode.ProcessingMode_BUFFERED, procmode.ProcessingMode_BUFFERED_PARTIAL:
		return false, s.send(passthrough)
	}
	return s.fail(&gateway.Error{Status: 500, Reason: reasonUnsupportedMode,
		Message: fmt.Sprintf("the gateway's request_body_mode is %v; the endpoint picker needs FULL_DUPLEX_STREAMED or BUFFERED to read the body", s.reqMode)})
}

// requestBody buffers a chunk; at the end of the body it decides.
func (s *stream) requestBody(b *extprocv3.HttpBody) (bool, error) {
	switch s.phase {
	case awaitHeaders:
		return s.protocolError("request_body before request_headers")
	case requestDone:
		return s.protocolError("request_body after the request's end of stream")
	}
	max := s.p.mapper.Config().MaxBodyBytes
	if len(s.body)+len(b.GetBody()) > max {
		return s.fail(&gateway.Error{Status: 413, Reason: gateway.ReasonBodyTooLarge,
			Message: fmt.Sprintf("request body too large: %d bytes received so far; the limit is %d bytes", len(s.body)+len(b.GetBody()), max)})
	}
	if e := s.appendBody(b.GetBody(), max); e != nil {
		return s.fail(e)
	}
	buffered := s.reqMode != procmode.ProcessingMode_FULL_DUPLEX_STREAMED
	if !b.GetEndOfStream() && !buffered {
		return false, nil
	}
	// BUFFERED sends the whole body in one message (end_of_stream is
	// false only when trailers follow).
	return s.decide(!b.GetEndOfStream())
}

// requestTrailers: in FULL_DUPLEX_STREAMED mode, trailers end a body whose
// last chunk had no end_of_stream; they are passed through.
func (s *stream) requestTrailers() (bool, error) {
	trailers := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
		RequestTrailers: &extprocv3.TrailersResponse{}}}
	switch s.phase {
	case awaitHeaders:
		return s.protocolError("request_trailers before request_headers")
	case inBody:
		if done, err := s.decide(true); done || err != nil {
			return done, err
		}
	}
	return false, s.send(trailers)
}

// decide maps the buffered body, picks, and answers: the headers (duplex)
// or the body (buffered) with the decision, then in duplex mode the body
// back. trailers says the request continues with trailers (the streamed
// body then ends without end_of_stream).
func (s *stream) decide(trailers bool) (bool, error) {
	s.phase = requestDone
	defer s.releaseBody()
	var req pb.PickRequest
	err := s.p.mapper.Map(gateway.Request{Path: s.path, Header: s.header, Body: s.body}, &req)
	if err != nil {
		return s.fail(gateway.ErrorFor(err))
	}
	if e := frontend.FlowHeaders(s.header, &req); e != nil {
		return s.fail(e)
	}
	s.pool, s.reqID = req.Pool, req.RequestId
	req.Audit = pb.AuditLevel_AUDIT_LEVEL_CHOSEN
	if s.p.fallbacks > 0 {
		req.Audit = pb.AuditLevel_AUDIT_LEVEL_FULL
	}
	if s.hasHint {
		if e := s.excludeOutsideSubset(&req); e != nil {
			return s.fail(e)
		}
	}
	ctx, meta := s.traceContext()
	ctx, span := s.p.tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindServer))
	resp, err := s.p.picker.PickFor(ctx, &req, meta)
	if err != nil {
		span.SetStatus(otelcodes.Error, status.Convert(err).Message())
	}
	span.End()
	if err != nil {
		return s.fail(gateway.ErrorFor(err))
	}
	dest := gateway.Destination(resp, s.p.fallbacks)
	s.chosen = resp.GetAddress()
	s.decided(resp)
	common := &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{
		SetHeaders: s.decisionHeaders(dest, resp)}}
	s.prefillMutation(common.HeaderMutation, resp)
	md := destinationMetadata(dest)
	s.p.met.request(s.ctx, resultRouted)
	if s.reqMode != procmode.ProcessingMode_FULL_DUPLEX_STREAMED {
		return false, s.send(&extprocv3.ProcessingResponse{DynamicMetadata: md, Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: common}}})
	}
	if err := s.send(&extprocv3.ProcessingResponse{DynamicMetadata: md, Response: &extprocv3.ProcessingResponse_RequestHeaders{
		RequestHeaders: &extprocv3.HeadersResponse{Response: common}}}); err != nil {
		return true, err
	}
	err = sendChunks(s.body, !trailers, func(chunk []byte, eos bool) error {
		return s.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: streamed(chunk, eos)}}})
	})
	return false, err
}

// traceContext is the context and PickMeta of the pick: the caller's trace
// context from traceparent/tracestate (W3C) when valid.
func (s *stream) traceContext() (context.Context, frontend.PickMeta) {
	meta := frontend.PickMeta{Start: s.start, Service: ServiceName, Method: "Process"}
	tp := s.header("traceparent")
	if tp == "" {
		return s.ctx, meta
	}
	carrier := propagation.MapCarrier{"traceparent": tp}
	if ts := s.header("tracestate"); ts != "" {
		carrier["tracestate"] = ts
	}
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	if !sc.IsValid() {
		return s.ctx, meta
	}
	meta.Trace = sc
	return trace.ContextWithRemoteSpanContext(s.ctx, sc), meta
}

// responseBody passes a response body chunk through: echoed in
// FULL_DUPLEX_STREAMED mode, continued otherwise.
func (s *stream) responseBody(b *extprocv3.HttpBody) error {
	if s.respMode != procmode.ProcessingMode_FULL_DUPLEX_STREAMED {
		return s.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{}}})
	}
	return sendChunks(b.GetBody(), b.GetEndOfStream(), func(chunk []byte, eos bool) error {
		return s.send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: streamed(chunk, eos)}}})
	})
}

// fail answers the request with an immediate response and ends the stream.
func (s *stream) fail(e *gateway.Error) (bool, error) {
	s.phase = requestDone
	s.p.met.request(s.ctx, e.Reason)
	return true, s.send(immediate(e))
}

// header is a request header's value by lower-case name ("" if absent).
func (s *stream) header(name string) string {
	for _, h := range s.headers {
		if h.GetKey() == name {
			if h.RawValue != nil {
				return string(h.RawValue)
			}
			return h.GetValue()
		}
	}
	return ""
}

// checkServed compares the served endpoint the gateway reports with the
// chosen one, once per stream.
func (s *stream) checkServed(req *extprocv3.ProcessingRequest) {
	if s.served || s.chosen == "" {
		return
	}
	v, ok := req.GetMetadataContext().GetFilterMetadata()[MetadataNamespace].GetFields()[ServedKey]
	if !ok {
		return
	}
	s.served = true
	served := v.GetStringValue()
	if served == s.chosen {
		return
	}
	s.p.met.servedMismatch(s.ctx, s.pool)
	ctx, _ := s.traceContext()
	s.p.picker.RecordServed(ctx, s.pool, s.reqID, s.chosen, served)
	s.p.log.Info("served endpoint differs from the chosen one (a retry or fallback)", "pool", s.pool, "request_id", s.reqID,
		"chosen", s.chosen, "served", served)
}
