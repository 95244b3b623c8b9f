package httproute

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
)

// PathOutcome is the HTTP front end of PickService.ReportOutcome.
const PathOutcome = "/v1/outcome"

// outcomeRoute is POST /v1/outcome under frontend.Wrap, authorized as
// ReportOutcome (the gateway role), with the body limit of /v1/pick; nil
// when the picker takes no outcomes.
func (h *Handler) outcomeRoute(p frontend.Picker, hc frontend.HTTP) http.Handler {
	sink, ok := p.(frontend.OutcomeSink)
	if !ok {
		return nil
	}
	return frontend.Wrap(hc, frontend.Route{Path: PathOutcome, FullMethod: pb.PickService_ReportOutcome_FullMethodName,
		Serve: func(ctx context.Context, w http.ResponseWriter, r *http.Request, _ frontend.PickMeta) int {
			return h.serveOutcome(ctx, sink, w, r)
		}})
}

// serveOutcome answers one authorized /v1/outcome: a ReportOutcomeRequest
// in protobuf JSON (unknown fields refused), answered with the
// ReportOutcomeResponse, or a google.rpc.Status JSON with the HTTP status
// of its code (400 for a bad body or outcome, 413 over the limit).
func (h *Handler) serveOutcome(ctx context.Context, sink frontend.OutcomeSink, w http.ResponseWriter, r *http.Request) int {
	body, err := readBody(w, r, h.maxPickBytes)
	if err != nil {
		return frontend.WriteStatus(w, bodyStatus(err))
	}
	req := &pb.ReportOutcomeRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		return frontend.WriteStatus(w, status.Errorf(codes.InvalidArgument, "body is not a ReportOutcomeRequest in protobuf JSON: %v", err))
	}
	resp, err := sink.OutcomesFor(ctx, req)
	if err != nil {
		return frontend.WriteStatus(w, err)
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		return frontend.WriteStatus(w, status.Errorf(codes.Internal, "encoding the ReportOutcomeResponse: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	return http.StatusOK
}

// Headers of a /v1/route answer that a gateway needs to report outcomes
// (POST /v1/outcome names the pool and the instance tried).
const (
	PoolHeader      = "x-prefixroute-pool"
	InstancesHeader = "x-prefixroute-instances"
)

// destinationInstances is the comma-separated instance ids of dest, the
// destination list gateway.Destination made of resp: the chosen instance,
// then each fallback's id from the audit.
func destinationInstances(resp *pb.PickResponse, dest string) string {
	chosen := resp.GetInstanceId()
	if !strings.Contains(dest, ",") {
		return chosen
	}
	var sb strings.Builder
	sb.WriteString(chosen)
	addrs := strings.Split(dest, ",")[1:]
	for _, a := range addrs {
		sb.WriteByte(',')
		for _, in := range resp.GetDecision().GetInstances() {
			if in.GetAddress() == a && in.GetInstanceId() != chosen {
				sb.WriteString(in.GetInstanceId())
				break
			}
		}
	}
	return sb.String()
}
