package extproc

import (
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// Results of a request in prefixroute_extproc_requests_total besides the
// error reasons (gateway.Reason*, reasonUnsupportedMode, the subset
// reasons).
const (
	resultRouted      = "routed"      // decided and answered with a destination
	resultPassthrough = "passthrough" // no body: passed through untouched
)

// Reasons of the answers the Processor makes itself.
const (
	reasonUnsupportedMode    = "unsupported_body_mode" // 500: the gateway's body mode cannot carry a decision
	reasonEmptySubset        = "empty_subset"          // 503: the subset hint lists no endpoint
	reasonSubsetExcludeLimit = "subset_exclude_limit"  // 500: the subset leaves more instances to exclude than a pick may carry
	reasonNoInstanceInSubset = gateway.ReasonNoEligibleInstance
)

// setHeader sets (overwriting a client's) one request header.
func setHeader(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

// destinationMetadata is envoy.lb / x-gateway-destination-endpoint = dest.
func destinationMetadata(dest string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			gateway.DestinationHeader: structpb.NewStringValue(dest)}})}}
}

// streamed is a body mutation that streams chunk (FULL_DUPLEX_STREAMED).
func streamed(chunk []byte, eos bool) *extprocv3.CommonResponse {
	return &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
		StreamedResponse: &extprocv3.StreamedBodyResponse{Body: chunk, EndOfStream: eos}}}}
}

// sendChunks calls send for body in chunks of at most BodyChunkBytes, eos
// on the last; an empty body is one empty chunk when eos is set, none
// otherwise.
func sendChunks(body []byte, eos bool, send func(chunk []byte, eos bool) error) error {
	if len(body) == 0 {
		if eos {
			return send(nil, true)
		}
		return nil
	}
	for len(body) > 0 {
		n := min(len(body), BodyChunkBytes)
		if err := send(body[:n], eos && n == len(body)); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}

// immediate is the ImmediateResponse of an error: its status, JSON body,
// content type, reason header and, for a pool warming up, retry-after.
func immediate(e *gateway.Error) *extprocv3.ProcessingResponse {
	hs := []*corev3.HeaderValueOption{
		setHeader("content-type", "application/json"),
		setHeader(gateway.ReasonHeader, e.Reason),
	}
	e.SetRetryAfter(func(_, v string) { hs = append(hs, setHeader("retry-after", v)) }) // Envoy wants lower case
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(e.Status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: hs},
			Body:    e.JSON(),
			Details: "prefixroute_" + e.Reason + "_" + strconv.Itoa(e.Status),
		}}}
}

// removeSpoofed is the headers response of a request not (yet) decided:
// nothing, unless the client sent its own destination header, which is
// removed (with the route cache) so that it cannot pick the upstream.
func (s *stream) removeSpoofed() *extprocv3.CommonResponse {
	var rm []string
	for _, h := range s.headers {
		if k := h.GetKey(); k == gateway.DestinationHeader || k == gateway.PrefillerHeader {
			rm = append(rm, k)
		}
	}
	if rm == nil {
		return nil
	}
	return &extprocv3.CommonResponse{ClearRouteCache: true, HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: rm}}
}

// prefillMutation sets the prefill headers of a disaggregated pick on
// mut, or removes a client's own x-prefiller-host-port from a local one,
// so that a decode-side sidecar never sends a prefill leg where the
// client said.
func (s *stream) prefillMutation(mut *extprocv3.HeaderMutation, resp *pb.PickResponse) {
	if addr, id, ok := gateway.Prefiller(resp); ok {
		mut.SetHeaders = append(mut.SetHeaders, setHeader(gateway.PrefillerHeader, addr), setHeader(gateway.PrefillInstanceHeader, id))
		return
	}
	for _, h := range s.headers {
		if h.GetKey() == gateway.PrefillerHeader {
			mut.RemoveHeaders = append(mut.RemoveHeaders, gateway.PrefillerHeader)
			return
		}
	}
}

// decisionHeaders are the header mutation's headers: the destination, and
// the decision header when configured.
func (s *stream) decisionHeaders(dest string, resp *pb.PickResponse) []*corev3.HeaderValueOption {
	hs := []*corev3.HeaderValueOption{setHeader(gateway.DestinationHeader, dest)}
	if s.p.decHeader != "" {
		p := 0.0
		for _, in := range resp.GetDecision().GetInstances() {
			if in.GetInstanceId() == resp.GetInstanceId() {
				p = in.GetJointProbability()
				break
			}
		}
		hs = append(hs, setHeader(s.p.decHeader, "deployment="+resp.GetDeployment()+"; probability="+strconv.FormatFloat(p, 'g', 4, 64)))
	}
	return hs
}
