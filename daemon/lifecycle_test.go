package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// obsGet returns the status code and body of an HTTP GET.
func obsGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestShutdownFinishesInFlightPicks holds one Pick inside its handler and
// shuts the daemon down: /readyz turns 503 while the HTTP server still
// answers, the held Pick completes with a full response once released (its
// instance still connected), then the report stream ends with Unavailable,
// and Shutdown returns nil (twice).
func TestShutdownFinishesInFlightPicks(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	d := obsStart(t, func(c *Config) {
		c.testUnary = func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if r, ok := req.(*pb.PickRequest); ok && r.GetRequestId() == "hold" {
				close(entered)
				<-release
			}
			return h(ctx, req)
		}
	})
	pick, load, _ := obsClients(t, d)
	base := "http://" + d.HTTPAddr()
	for _, p := range []struct{ path, body string }{{"/healthz", "ok\n"}, {"/readyz", "ready\n"}} {
		if code, body := obsGet(t, base+p.path); code != http.StatusOK || body != p.body {
			t.Errorf("GET %s before shutdown: %d %q", p.path, code, body)
		}
	}
	cc, err := grpc.NewClient(d.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	h, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: pb.PickService_ServiceDesc.ServiceName})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health of PickService: %v, %v", h, err)
	}

	st := obsConnect(t, load)
	st.report(&pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: "i", Address: "10.0.0.1:1"})
	type result struct {
		resp *pb.PickResponse
		err  error
	}
	held := make(chan result, 1)
	go func() {
		resp, err := pick.Pick(context.Background(), &pb.PickRequest{Pool: "p", RequestId: "hold"})
		held <- result{resp, err}
	}()
	<-entered
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- d.Shutdown(ctx)
	}()

	testwait.Eventually(t, "/readyz 503 during shutdown", func() bool {
		code, _ := obsGet(t, base+"/readyz")
		return code == http.StatusServiceUnavailable
	})
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a Pick in flight", err)
	default:
	}
	close(release)
	r := <-held
	if r.err != nil || r.resp.GetAddress() != "10.0.0.1:1" || r.resp.GetDecision() == nil {
		t.Errorf("in-flight Pick across shutdown: %v, %v", r.resp, r.err)
	}
	if _, err := st.stream.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("report stream at shutdown: %v, want Unavailable saying the router is shutting down", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}
