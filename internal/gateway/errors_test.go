package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/internal/openai"
	"github.com/prefixroute/prefixroute/internal/protoconv"
)

func TestErrorFor(t *testing.T) {
	tests := []struct {
		err    error
		status int
		reason string
		msg    string
	}{
		{fmt.Errorf("%w: model is missing", openai.ErrBadBody), 400, ReasonBadRequest, "invalid request body: model is missing"},
		{fmt.Errorf("%w: 20 bytes", openai.ErrBodyTooLarge), 413, ReasonBodyTooLarge, "request body too large: 20 bytes"},
		{fmt.Errorf("%w: /x", openai.ErrUnknownEndpoint), 404, ReasonUnknownEndpoint, "unknown endpoint: /x"},
		{ErrNoPool, 404, ReasonUnknownModel, "no pool for the request"},
		{status.Error(codes.InvalidArgument, "pool is empty"), 400, ReasonBadRequest, "pool is empty"},
		{status.Error(codes.NotFound, `pool "x" not found`), 404, ReasonUnknownPool, `pool "x" not found`},
		{status.Error(codes.Unavailable, "no eligible instance"), 503, ReasonNoEligibleInstance, "no eligible instance"},
		{protoconv.WithReason(codes.Unavailable, "warming", protoconv.ReasonPoolWarming, "chat").Err(), 503, ReasonPoolWarming, "warming"},
		{protoconv.WithReason(codes.Unavailable, "other", "OTHER", "").Err(), 503, ReasonNoEligibleInstance, "other"},
		{status.Error(codes.FailedPrecondition, "drained"), 503, ReasonDrained, "drained"},
		{status.Error(codes.ResourceExhausted, "saturated"), 429, ReasonSaturated, "saturated"},
		{protoconv.SLOUnattainable("best 120 ms", "chat", 100, 120).Err(), 429, ReasonSLOUnattainable, "best 120 ms"},
		{fmt.Errorf("%w: x-slo-ttft-ms is \"-1\"", ErrBadHeader), 400, ReasonBadRequest, `bad header: x-slo-ttft-ms is "-1"`},
		{status.Error(codes.DeadlineExceeded, "late"), 504, ReasonTimeout, "late"},
		{status.Error(codes.Internal, "boom"), 500, ReasonInternal, "boom"},
		{errors.New("plain"), 500, ReasonInternal, "plain"},
		{fmt.Errorf("wrapped: %w", &Error{418, "teapot", "short and stout"}), 418, "teapot", "short and stout"},
	}
	for _, tt := range tests {
		e := ErrorFor(tt.err)
		if e.Status != tt.status || e.Reason != tt.reason || e.Message != tt.msg {
			t.Errorf("ErrorFor(%v) = %+v; want %d %s %q", tt.err, *e, tt.status, tt.reason, tt.msg)
		}
		wantRetry := 0
		if tt.reason == ReasonPoolWarming {
			wantRetry = 1
		}
		if got := e.RetryAfter(); got != wantRetry {
			t.Errorf("ErrorFor(%v).RetryAfter() = %d; want %d", tt.err, got, wantRetry)
		}
	}
	if ErrorFor(nil) != nil {
		t.Error("ErrorFor(nil) != nil")
	}
}

func TestErrorJSON(t *testing.T) {
	for _, tt := range []struct {
		e    Error
		want string
	}{
		{Error{400, ReasonBadRequest, `bad "x"`}, `{"error":{"message":"bad \"x\"","type":"invalid_request_error","code":"bad_request"}}`},
		{Error{429, ReasonSaturated, "full"}, `{"error":{"message":"full","type":"rate_limit_error","code":"saturated"}}`},
		{Error{503, ReasonNoEligibleInstance, "none"}, `{"error":{"message":"none","type":"server_error","code":"no_eligible_instance"}}`},
		{Error{503, ReasonPoolWarming, "soon"}, `{"error":{"message":"soon","type":"server_error","code":"pool_warming"}}`},
	} {
		if got := string(tt.e.JSON()); got != tt.want {
			t.Errorf("JSON() = %s\nwant     %s", got, tt.want)
		}
		if !json.Valid(tt.e.JSON()) {
			t.Errorf("JSON() of %+v is not valid JSON", tt.e)
		}
	}
	if got := (&Error{503, "drained", "weights 0"}).Error(); got != "drained: weights 0" {
		t.Errorf("Error() = %q", got)
	}
}
