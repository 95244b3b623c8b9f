package extproc

import (
	"strconv"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
)

// The ext_proc server reports what it sees of each routed request itself
// (PickService.ReportOutcome, in process, no RPC): the endpoint that
// served it (the served-endpoint metadata, else the chosen one) and its
// outcome from the response's :status, served below 500, upstream_error
// from 500 (Envoy's own 503 for a refused connection included: ext_proc
// cannot tell it from the model server's, so nothing is excluded for it;
// Envoy's outlier detection covers that path), and, when the gateway sends
// the response body (response_body_mode other than NONE), ttft_ms: the
// time from the routing answer (the request leaving for the upstream) to
// the first response body chunk. The outcome is kept with the pick by the
// request's x-request-id.

// outcomeState is a stream's outcome until reported.
type outcomeState struct {
	resp     *pb.PickResponse // the pick's answer, for the served endpoint's id
	sentAt   time.Time        // when the routing answer was sent
	status   pb.OutcomeStatus // from the response headers; 0 until then
	instance string           // the instance that served
	reported bool
}

// decided notes the pick the outcome will be of.
func (s *stream) decided(resp *pb.PickResponse) {
	s.out.resp, s.out.sentAt = resp, time.Now()
}

// responseHeadersSeen notes the response's status and served endpoint,
// and reports at once when no body will follow (end_of_stream, or the
// gateway sends no response body).
func (s *stream) responseHeadersSeen(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) {
	if s.out.resp == nil || s.out.status != 0 {
		return
	}
	code := 0
	for _, hv := range h.GetHeaders().GetHeaders() {
		if hv.GetKey() == ":status" {
			v := hv.GetValue()
			if hv.RawValue != nil {
				v = string(hv.RawValue)
			}
			code, _ = strconv.Atoi(v)
			break
		}
	}
	s.out.status = pb.OutcomeStatus_OUTCOME_STATUS_SERVED
	if code >= 500 || code == 0 {
		s.out.status = pb.OutcomeStatus_OUTCOME_STATUS_UPSTREAM_ERROR
	}
	s.out.instance = s.out.resp.GetInstanceId()
	if v, ok := req.GetMetadataContext().GetFilterMetadata()[MetadataNamespace].GetFields()[ServedKey]; ok {
		s.out.instance = s.instanceAt(v.GetStringValue())
	}
	if h.GetEndOfStream() || s.respMode == 0 { // NONE: no body will come
		s.reportOutcome(nil)
	}
}

// responseBodySeen reports the outcome with its ttft on the first body
// chunk.
func (s *stream) responseBodySeen() {
	if s.out.status == 0 || s.out.reported {
		return
	}
	ttft := float64(time.Since(s.out.sentAt).Microseconds()) / 1000
	s.reportOutcome(&ttft)
}

// instanceAt is the id of the pick's instance at address addr: the chosen
// one, else a fallback's from the audit; "" when the audit does not list
// it.
func (s *stream) instanceAt(addr string) string {
	r := s.out.resp
	if addr == r.GetAddress() {
		return r.GetInstanceId()
	}
	for _, in := range r.GetDecision().GetInstances() {
		if in.GetAddress() == addr {
			return in.GetInstanceId()
		}
	}
	return ""
}

// reportOutcome hands the outcome to the router once; the stream's end
// reports one still pending, without ttft.
func (s *stream) reportOutcome(ttft *float64) {
	if s.out.reported || s.out.status == 0 || s.out.instance == "" {
		return
	}
	s.out.reported = true
	sink, ok := s.p.picker.(frontend.OutcomeSink)
	if !ok {
		return
	}
	req := &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{{Pool: s.pool, RequestId: s.reqID, InstanceId: s.out.instance,
		Status: s.out.status, TtftMs: ttft}}}
	if _, err := sink.OutcomesFor(s.ctx, req); err != nil {
		s.p.log.Warn("ext_proc outcome not taken", "pool", s.pool, "request_id", s.reqID, "instance", s.out.instance, "err", err)
	}
}
