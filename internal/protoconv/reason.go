package protoconv

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo the router attaches
// to a status whose reason a client may act on.
const ErrorDomain = "prefixroute.dev"

// ReasonPoolWarming is the ErrorInfo reason of an Unavailable pick from a
// pool the router knows (configured, or seen with instances within the
// seen set's TTL, before a restart too) but whose instances have not
// reported yet: retry shortly (after RetryAfterSeconds), the pool name is
// right. The HTTP front ends answer it 503 with Retry-After.
const ReasonPoolWarming = "POOL_WARMING"

// RetryAfterSeconds is the Retry-After, in seconds, of a warming pool's
// HTTP answer: 1 s, about ten first reconnects of a Reporter (100 ms).
const RetryAfterSeconds = 1

// WithReason returns a status of code and msg carrying an ErrorInfo of
// ErrorDomain with reason and, when pool is not "", metadata pool=pool.
func WithReason(code codes.Code, msg, reason, pool string) *status.Status {
	st := status.New(code, msg)
	info := &errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain}
	if pool != "" {
		info.Metadata = map[string]string{"pool": pool}
	}
	if d, err := st.WithDetails(info); err == nil {
		return d
	}
	return st
}

// ReasonOf returns the reason of err's ErrorInfo of ErrorDomain, or ""
// when err is no status or carries none.
func ReasonOf(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}
