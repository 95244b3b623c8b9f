package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/internal/openai"
	"github.com/prefixroute/prefixroute/internal/protoconv"
)

// Reasons: the short tokens of ReasonHeader, one per answer class.
const (
	ReasonBadRequest         = "bad_request"          // 400: the body is not a valid request
	ReasonBodyTooLarge       = "body_too_large"       // 413: the body is over the limit
	ReasonUnknownEndpoint    = "unknown_endpoint"     // 404: the path is no OpenAI endpoint
	ReasonUnknownModel       = "unknown_model"        // 404: the request maps to no pool
	ReasonUnknownPool        = "unknown_pool"         // 404: the router knows no such pool
	ReasonNoEligibleInstance = "no_eligible_instance" // 503: no instance may serve it
	ReasonPoolWarming        = "pool_warming"         // 503 + Retry-After: a known pool's instances have not reported yet
	ReasonDrained            = "drained"              // 503: every deployment with instances has weight 0
	ReasonSaturated          = "saturated"            // 429: every eligible instance is saturated
	ReasonTimeout            = "timeout"              // 504: the pick's deadline passed
	ReasonInternal           = "internal"             // 500: anything else
)

// Error is the HTTP answer to a request that got no instance.
type Error struct {
	Status  int    // HTTP status code
	Reason  string // ReasonHeader's value, one of the Reason* tokens
	Message string // what was wrong, for a person
}

// RetryAfter is the Retry-After of e in seconds, 0 for none: a pool
// warming up is worth a retry after protoconv.RetryAfterSeconds (1 s).
func (e *Error) RetryAfter() int {
	if e.Reason == ReasonPoolWarming {
		return protoconv.RetryAfterSeconds
	}
	return 0
}

// SetRetryAfter sets the Retry-After header in set (a header setter, such
// as http.Header.Set) when e has one (RetryAfter).
func (e *Error) SetRetryAfter(set func(key, value string)) {
	if n := e.RetryAfter(); n > 0 {
		set(RetryAfterHeader, strconv.Itoa(n))
	}
}

// RetryAfterHeader is the header of Error.RetryAfter.
const RetryAfterHeader = "Retry-After"

// Error returns the message with the reason.
func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// JSON is the OpenAI-style error body:
// {"error":{"message":...,"type":...,"code":...}}, with code the Reason and
// type "invalid_request_error" (400, 404, 413), "rate_limit_error" (429)
// or "server_error" (5xx).
func (e *Error) JSON() []byte {
	typ := "server_error"
	switch {
	case e.Status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case e.Status >= 400 && e.Status < 500:
		typ = "invalid_request_error"
	}
	type inner struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	}
	b, _ := json.Marshal(struct {
		Error inner `json:"error"`
	}{inner{e.Message, typ, e.Reason}})
	return b
}

// ErrorFor maps an error of Map or of a pick (a gRPC status from
// server.PickFor) to its answer:
//
//	*Error                              itself
//	openai.ErrBadBody, InvalidArgument  400 bad_request
//	ErrBadHeader                        400 bad_request
//	openai.ErrBodyTooLarge              413 body_too_large
//	openai.ErrUnknownEndpoint           404 unknown_endpoint
//	ErrNoPool                           404 unknown_model
//	NotFound                            404 unknown_pool
//	Unavailable, reason POOL_WARMING    503 pool_warming, Retry-After 1 s
//	Unavailable                         503 no_eligible_instance
//	FailedPrecondition                  503 drained (every weight is 0)
//	ResourceExhausted, SLO_UNATTAINABLE 429 slo_unattainable
//	ResourceExhausted                   429 saturated
//	DeadlineExceeded, Canceled          504 timeout
//	anything else                       500 internal
//
// The message is the error's (a status's message without its code). A nil
// err is nil.
func ErrorFor(err error) *Error {
	if err == nil {
		return nil
	}
	var ge *Error
	if errors.As(err, &ge) {
		return ge
	}
	msg := err.Error()
	switch {
	case errors.Is(err, openai.ErrBodyTooLarge):
		return &Error{http.StatusRequestEntityTooLarge, ReasonBodyTooLarge, msg}
	case errors.Is(err, openai.ErrBadBody), errors.Is(err, ErrBadHeader):
		return &Error{http.StatusBadRequest, ReasonBadRequest, msg}
	case errors.Is(err, openai.ErrUnknownEndpoint):
		return &Error{http.StatusNotFound, ReasonUnknownEndpoint, msg}
	case errors.Is(err, ErrNoPool):
		return &Error{http.StatusNotFound, ReasonUnknownModel, msg}
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{http.StatusInternalServerError, ReasonInternal, msg}
	}
	msg = st.Message()
	switch st.Code() {
	case codes.InvalidArgument:
		return &Error{http.StatusBadRequest, ReasonBadRequest, msg}
	case codes.NotFound:
		return &Error{http.StatusNotFound, ReasonUnknownPool, msg}
	case codes.Unavailable:
		if protoconv.ReasonOf(err) == protoconv.ReasonPoolWarming {
			return &Error{http.StatusServiceUnavailable, ReasonPoolWarming, msg}
		}
		return &Error{http.StatusServiceUnavailable, ReasonNoEligibleInstance, msg}
	case codes.FailedPrecondition:
		return &Error{http.StatusServiceUnavailable, ReasonDrained, msg}
	case codes.ResourceExhausted:
		if protoconv.ReasonOf(err) == protoconv.ReasonSLOUnattainable {
			return &Error{http.StatusTooManyRequests, ReasonSLOUnattainable, msg}
		}
		return &Error{http.StatusTooManyRequests, ReasonSaturated, msg}
	case codes.DeadlineExceeded, codes.Canceled:
		return &Error{http.StatusGatewayTimeout, ReasonTimeout, msg}
	}
	return &Error{http.StatusInternalServerError, ReasonInternal, msg}
}
