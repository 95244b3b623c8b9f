package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// TestPanicBecomesInternal makes one Pick panic inside its handler (the
// daemon's clock panics once when armed; the sweep and ramp tickers, the
// clock's other readers, wait an hour): that call fails with Internal, the
// stack is logged, the panic is counted, the pick is counted as failed, and
// the next call succeeds.
func TestPanicBecomesInternal(t *testing.T) {
	var logs testwait.SyncBuffer
	var armed atomic.Bool
	d := obsStart(t, func(c *Config) {
		c.Server.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		c.Server.SweepInterval, c.Server.RampTick = time.Hour, time.Hour
		c.Server.Now = func() time.Time {
			if armed.CompareAndSwap(true, false) {
				var m map[string]int
				//lint:ignore SA5000 the test needs a real runtime panic inside the handler
				m["boom"]++ // a real runtime panic: assignment to entry in nil map
			}
			return time.Now()
		}
	})
	pick, load, _ := obsClients(t, d)
	obsConnect(t, load).report(&pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: "i", Address: "10.0.0.1:1"})

	armed.Store(true)
	_, err := pick.Pick(context.Background(), &pb.PickRequest{Pool: "p"})
	if status.Code(err) != codes.Internal {
		t.Fatalf("Pick with a panicking handler: %v, want Internal", err)
	}
	if strings.Contains(status.Convert(err).Message(), "nil map") {
		t.Errorf("the panic's details reached the client: %q", status.Convert(err).Message())
	}
	if _, err := pick.Pick(context.Background(), &pb.PickRequest{Pool: "p"}); err != nil {
		t.Fatalf("Pick after the panic: %v", err)
	}

	var logged map[string]any
	for _, l := range logs.JSONLines(t) {
		if strings.HasPrefix(l["msg"].(string), "recovered from a panic") {
			logged = l
		}
	}
	if logged == nil {
		t.Fatalf("no log line for the panic; logs:\n%s", logs.String())
	}
	if s, _ := logged["stack"].(string); !strings.Contains(s, "goroutine") || !strings.Contains(s, "middleware_test.go") {
		t.Errorf("logged stack does not show the panicking frame:\n%s", s)
	}
	if logged["grpc.method"] != pb.PickService_Pick_FullMethodName {
		t.Errorf("logged method %v", logged["grpc.method"])
	}

	fams := obsScrape(t, d)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"prefixroute_panics_recovered_total", nil, 1},
		{"prefixroute_picks_total", map[string]string{"pool": "p", "outcome": "error"}, 1},
		{"prefixroute_picks_total", map[string]string{"pool": "p", "outcome": "ok"}, 1},
	} {
		if got := obsValue(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestCallLogsCarryTraceID checks the logging interceptor's lines: JSON,
// at the level codeToLevel gives, with the trace id the caller propagated
// (W3C traceparent) although this router exports no traces.
func TestCallLogsCarryTraceID(t *testing.T) {
	var logs testwait.SyncBuffer
	d := obsStart(t, func(c *Config) {
		c.Server.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	pick, _, _ := obsClients(t, d)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if _, err := pick.Pick(ctx, &pb.PickRequest{Pool: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Pick of an unknown pool: %v", err)
	}
	var finished map[string]any
	for _, l := range logs.JSONLines(t) {
		if l["msg"] == "finished call" && l["grpc.method"] == "Pick" {
			finished = l
		}
	}
	if finished == nil {
		t.Fatalf("no finished-call line for Pick; logs:\n%s", logs.String())
	}
	for k, want := range map[string]any{"trace_id": traceID, "grpc.code": "NotFound", "level": "INFO", "component": "grpc"} {
		if finished[k] != want {
			t.Errorf("finished-call line: %s = %v, want %v (line %v)", k, finished[k], want, finished)
		}
	}
}

// TestCodeToLevel pins the log level of each kind of outcome.
func TestCodeToLevel(t *testing.T) {
	for _, c := range []struct {
		code codes.Code
		want slog.Level
	}{
		{codes.OK, slog.LevelDebug},
		{codes.Canceled, slog.LevelDebug},
		{codes.InvalidArgument, slog.LevelInfo},
		{codes.Unavailable, slog.LevelInfo},
		{codes.FailedPrecondition, slog.LevelInfo},
		{codes.Internal, slog.LevelError},
		{codes.Unknown, slog.LevelError},
	} {
		if got := slog.Level(codeToLevel(c.code)); got != c.want {
			t.Errorf("codeToLevel(%v) = %v, want %v", c.code, got, c.want)
		}
	}
}

// TestCanceledReportStreamIsTheClients opens report streams and cancels
// them from the client: each ends in the log as the client's doing, code
// Canceled at DEBUG, not as a server fault (Unknown at ERROR).
func TestCanceledReportStreamIsTheClients(t *testing.T) {
	var logs testwait.SyncBuffer
	d := obsStart(t, func(c *Config) {
		c.Server.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	_, load, _ := obsClients(t, d)
	const streams = 6 // the handler's select picks either ready case: each stream is one more chance to catch the wrong one
	for i := range streams {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := load.ReportLoad(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := &obsStream{t: t, stream: st}
		s.report(&pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: fmt.Sprintf("i%d", i), Address: "10.0.0.1:1"})
		cancel()
	}
	finished := func() []map[string]any {
		var out []map[string]any
		for _, l := range logs.JSONLines(t) {
			if l["msg"] == "finished call" && l["grpc.method"] == "ReportLoad" {
				out = append(out, l)
			}
		}
		return out
	}
	// The server logs after the client's cancel: wait for every line.
	testwait.EventuallyOK(t, func() string {
		if n := len(finished()); n < streams {
			return fmt.Sprintf("%d ReportLoad lines, want %d; logs:\n%s", n, streams, logs.String())
		}
		return ""
	})
	lines := finished()
	if len(lines) != streams {
		t.Fatalf("%d ReportLoad lines, want %d; logs:\n%s", len(lines), streams, logs.String())
	}
	for _, l := range lines {
		if l["grpc.code"] != "Canceled" || l["level"] != "DEBUG" {
			t.Errorf("a stream the client canceled is logged with code %v at %v: %v", l["grpc.code"], l["level"], l)
		}
	}
}

// tagRecorder is a stats.Handler that records the methods TagRPC saw and
// marks the context it returns.
type tagRecorder struct {
	stats.Handler
	methods []string
}

type tagKey struct{}

func (r *tagRecorder) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	r.methods = append(r.methods, info.FullMethodName)
	return context.WithValue(ctx, tagKey{}, info.FullMethodName)
}

// TestPickStackDelegates checks that pickStack hands every call, Pick
// (whose stack it grows first) or not, to the wrapped handler's TagRPC
// and returns that handler's context.
func TestPickStackDelegates(t *testing.T) {
	for _, method := range []string{pb.PickService_Pick_FullMethodName, "/grpc.health.v1.Health/Check", pb.LoadService_ReportLoad_FullMethodName} {
		rec := &tagRecorder{}
		var ctx context.Context
		done := make(chan struct{})
		go func() { // a fresh goroutine, as grpc-go gives each call
			defer close(done)
			ctx = pickStack{rec}.TagRPC(context.Background(), &stats.RPCTagInfo{FullMethodName: method})
		}()
		<-done
		if len(rec.methods) != 1 || rec.methods[0] != method {
			t.Errorf("%s: wrapped TagRPC saw %q, want it once", method, rec.methods)
		}
		if got, _ := ctx.Value(tagKey{}).(string); got != method {
			t.Errorf("%s: TagRPC returned a context without the wrapped handler's value (%q)", method, got)
		}
	}
	if growStack(0) != 0 {
		t.Error("growStack(0) != 0")
	}
}
