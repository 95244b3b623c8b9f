package servertest

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyNoLeaks runs a package's tests and then fails the run if goroutines
// started by them are still running: a server, stream or reporter a test
// forgot to stop. Call it from TestMain in every package whose tests start
// servers:
//
//	func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }
//
// Goroutines that libraries start once per process and never stop (the
// OpenTelemetry and gRPC internals listed in ignored) are not leaks.
func VerifyNoLeaks(m *testing.M) {
	goleak.VerifyTestMain(m, ignored...)
}

// ignored are process-wide goroutines of libraries, started on first use
// and kept for the life of the process by design.
var ignored = []goleak.Option{
	// gRPC's resolver/balancer callback serializers outlive a ClientConn by
	// a moment after Close; goleak retries for a while, so they rarely
	// show, but they are not ours when they do.
	goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	// OpenTelemetry's global batch span processor and the Prometheus
	// exporter's collector are process-wide.
	goleak.IgnoreAnyFunction("go.opentelemetry.io/otel/sdk/trace.(*batchSpanProcessor).processQueue"),
	// The race detector's and testing's own helpers.
	goleak.IgnoreTopFunction("testing.(*T).Parallel"),
}
