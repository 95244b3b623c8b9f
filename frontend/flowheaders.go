package frontend

import (
	"net/http"
	"strconv"
	"strings"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// The request headers of flow control (docs/flow-control.md) that the
// ext_proc and /v1/route front ends read into PickRequest.flow_id and
// priority.
const (
	// FairnessIDHeader is llm-d's fairness key, PickRequest.flow_id.
	FairnessIDHeader = "x-llm-d-inference-fairness-id"
	// FairnessIDAliasHeader is its deprecated Gateway API Inference
	// Extension name, read when FairnessIDHeader is absent.
	FairnessIDAliasHeader = "x-gateway-inference-fairness-id"
	// PriorityHeader is PickRequest.priority: a decimal int32, higher
	// first, negative sheddable. (llm-d names an InferenceObjective
	// instead; prefixroute takes the number.)
	PriorityHeader = "x-prefixroute-priority"
)

// FlowHeaders reads the flow-control headers from header (by lower-case
// name, "" when absent) into req: flow_id from FairnessIDHeader, else
// FairnessIDAliasHeader; priority from PriorityHeader. An absent header
// leaves the field. A priority that is not a decimal int32, or a flow id
// over 128 bytes, is a 400 naming the header. Safe for concurrent use.
func FlowHeaders(header func(string) string, req *pb.PickRequest) *gateway.Error {
	if header == nil {
		return nil
	}
	name, flow := FairnessIDHeader, header(FairnessIDHeader)
	if flow == "" {
		name, flow = FairnessIDAliasHeader, header(FairnessIDAliasHeader)
	}
	if flow != "" {
		if len(flow) > auth.MaxFlowIDBytes {
			return &gateway.Error{Status: http.StatusBadRequest, Reason: gateway.ReasonBadRequest,
				Message: name + " is " + strconv.Itoa(len(flow)) + " bytes; at most " + strconv.Itoa(auth.MaxFlowIDBytes)}
		}
		req.FlowId = flow
	}
	if v := header(PriorityHeader); v != "" {
		p, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return &gateway.Error{Status: http.StatusBadRequest, Reason: gateway.ReasonBadRequest,
				Message: PriorityHeader + " is " + strconv.Quote(v) + "; want a decimal integer in [-2147483648, 2147483647] (higher first, negative sheddable)"}
		}
		req.Priority = int32(p)
	}
	return nil
}
