package httproute

import (
	"context"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// POST /v1/route: the body is the client's OpenAI request, unchanged; the
// path of the client's request (which OpenAI endpoint it is) comes in the
// X-Original-URI header, nginx's auth_request idiom. The pool is the
// ?pool= parameter, else the one Options.Gateway maps the request to (its
// pool header, model map, default pool: prefixrouted's --extproc-* flags,
// shared with the ext_proc listener), else the body's model; the body may
// be at most Gateway.MaxBodyBytes (16 MiB by default). The answer is 204
// with
//
//	x-gateway-destination-endpoint  ip:port of the chosen instance, then up
//	                                to RouteFallbacks fallbacks, comma-separated
//	x-prefixroute-instance          its instance id
//	x-prefixroute-deployment        its deployment
//	x-prefixroute-probability       P(d)·P(i|d) of the choice
//	x-prefixroute-pool              the pool picked from
//	x-prefixroute-instances         the instance ids of the destination
//	                                list, in its order (for POST /v1/outcome)
//	x-prefiller-host-port           ip:port of the prefill instance, only
//	                                when the pick is disaggregated (the
//	                                destination is then the decode instance)
//	x-prefixroute-prefill-instance  its instance id, likewise
//
// or, when the request gets no instance, gateway.ErrorFor's status with its
// OpenAI-style JSON body and the x-prefixroute-reason header, exactly as
// the ext_proc listener answers (plus 401 unauthenticated and 403
// permission_denied for credentials). The body is hashed and dropped: no
// part of it is kept, logged or recorded.

// Headers of a /v1/route answer besides gateway.DestinationHeader.
const (
	OriginalURIHeader = "X-Original-URI"
	InstanceHeader    = "x-prefixroute-instance"
	DeploymentHeader  = "x-prefixroute-deployment"
	ProbabilityHeader = "x-prefixroute-probability"
)

// RouteFallbacks is how many fallback addresses /v1/route lists after the
// chosen one, for a gateway to retry on a connection failure.
const RouteFallbacks = 2

// Reasons of the credential failures of /v1/route (the gateway package's
// reasons cover the request and the pick).
const (
	reasonUnauthenticated  = "unauthenticated"
	reasonPermissionDenied = "permission_denied"
)

// serveRoute answers one authorized /v1/route and returns the HTTP status
// it wrote.
func (h *Handler) serveRoute(ctx context.Context, w http.ResponseWriter, r *http.Request, meta frontend.PickMeta) int {
	path := r.Header.Get(OriginalURIHeader)
	if path == "" {
		return writeRouteError(w, &gateway.Error{Status: http.StatusBadRequest, Reason: gateway.ReasonBadRequest,
			Message: "no " + OriginalURIHeader + " header: send the path of the client's request, e.g. " + OriginalURIHeader + ": /v1/chat/completions"})
	}
	// The body is held in memory while the request is served, so it is
	// charged to the daemon-wide budget (--max-buffered-body-bytes), which
	// ext_proc shares: its declared length, or the limit when undeclared.
	limit := h.m.Config().MaxBodyBytes
	held := limit
	if r.ContentLength >= 0 && r.ContentLength < int64(limit) {
		held = int(r.ContentLength)
	}
	budget := h.m.Config().BodyBudget
	if e := budget.Take(held); e != nil {
		return writeRouteError(w, e)
	}
	defer budget.Give(held)
	body, err := readBody(w, r, limit)
	if err != nil {
		return writeRouteError(w, gateway.ErrorFor(err))
	}
	req := &pb.PickRequest{}
	greq := gateway.Request{Path: path, Header: r.Header.Get, Body: body, Pool: r.URL.Query().Get("pool")}
	if err := h.m.Map(greq, req); err != nil {
		return writeRouteError(w, gateway.ErrorFor(err))
	}
	if e := frontend.FlowHeaders(greq.Header, req); e != nil {
		return writeRouteError(w, e)
	}
	resp, err := h.p.PickFor(ctx, req, meta)
	if err != nil {
		return writeRouteError(w, gateway.ErrorFor(err))
	}
	hd := w.Header()
	dest := gateway.Destination(resp, RouteFallbacks)
	hd.Set(gateway.DestinationHeader, dest)
	hd.Set(PoolHeader, req.GetPool())
	hd.Set(InstancesHeader, destinationInstances(resp, dest))
	hd.Set(InstanceHeader, resp.GetInstanceId())
	hd.Set(DeploymentHeader, resp.GetDeployment())
	if addr, id, ok := gateway.Prefiller(resp); ok {
		hd.Set(gateway.PrefillerHeader, addr)
		hd.Set(gateway.PrefillInstanceHeader, id)
	}
	if pr, ok := chosenProbability(resp); ok {
		hd.Set(ProbabilityHeader, strconv.FormatFloat(pr, 'g', 6, 64))
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// chosenProbability is the joint probability of the chosen instance in
// resp's audit, and whether the audit lists it.
func chosenProbability(resp *pb.PickResponse) (float64, bool) {
	for _, in := range resp.GetDecision().GetInstances() {
		if in.GetInstanceId() == resp.GetInstanceId() {
			return in.GetJointProbability(), true
		}
	}
	return 0, false
}

// denied answers a /v1/route request whose credentials authorize no pick:
// 401 or 403 with the authenticator's message, in the route's error
// format.
func denied(w http.ResponseWriter, err error) int {
	st := status.Convert(err)
	if st.Code() == codes.Unauthenticated {
		return writeRouteError(w, &gateway.Error{Status: http.StatusUnauthorized, Reason: reasonUnauthenticated, Message: st.Message()})
	}
	return writeRouteError(w, &gateway.Error{Status: http.StatusForbidden, Reason: reasonPermissionDenied, Message: st.Message()})
}

// writeRouteError writes e and returns its status.
func writeRouteError(w http.ResponseWriter, e *gateway.Error) int {
	hd := w.Header()
	hd.Set(gateway.ReasonHeader, e.Reason)
	hd.Set("Content-Type", "application/json")
	e.SetRetryAfter(hd.Set)
	w.WriteHeader(e.Status)
	w.Write(e.JSON())
	return e.Status
}
