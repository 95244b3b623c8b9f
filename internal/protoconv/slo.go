package protoconv

import (
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ReasonSLOUnattainable is the ErrorInfo reason of a RESOURCE_EXHAUSTED
// pick whose ttft_slo_ms no eligible instance is predicted to meet under
// on_slo_miss shed. Its metadata: pool, ttft_slo_ms and
// best_predicted_ttft_ms (ms, shortest decimal form). The HTTP front ends
// answer it 429 with reason slo_unattainable.
const ReasonSLOUnattainable = "SLO_UNATTAINABLE"

// SLOUnattainable is the status of a pick shed for its TTFT target: code
// RESOURCE_EXHAUSTED, message msg, ErrorInfo ReasonSLOUnattainable with
// the pool, the target and the best predicted TTFT in ms.
func SLOUnattainable(msg, pool string, targetMs, bestMs float64) *status.Status {
	st := status.New(codes.ResourceExhausted, msg)
	info := &errdetails.ErrorInfo{Reason: ReasonSLOUnattainable, Domain: ErrorDomain, Metadata: map[string]string{
		"pool":                   pool,
		"ttft_slo_ms":            strconv.FormatFloat(targetMs, 'g', -1, 64),
		"best_predicted_ttft_ms": strconv.FormatFloat(bestMs, 'g', -1, 64),
	}}
	if d, err := st.WithDetails(info); err == nil {
		return d
	}
	return st
}
