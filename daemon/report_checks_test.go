package daemon

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/server"
)

// reportErr sends msgs on a new stream, reading each ack, and returns the
// stream's first error.
func reportErr(t *testing.T, load pb.LoadServiceClient, msgs ...*pb.ReportLoadRequest) error {
	t.Helper()
	st := obsConnect(t, load).stream
	for _, m := range msgs {
		if err := st.Send(m); err != nil {
			break
		}
		if _, err := st.Recv(); err != nil {
			return err
		}
	}
	return nil
}

// TestReportLoadChecks: the address must be host:port, and seq may not go
// backwards on a stream (equal is fine: clients that do not number their
// reports send 0).
func TestReportLoadChecks(t *testing.T) {
	d := obsStart(t, nil)
	_, load, _ := obsClients(t, d)
	id := func(addr string, seq uint64) *pb.ReportLoadRequest {
		return &pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: "i", Address: addr, Seq: seq}
	}
	tests := []struct {
		name string
		msgs []*pb.ReportLoadRequest
		want string // "" = no error
	}{
		{"ip:port", []*pb.ReportLoadRequest{id("10.0.0.1:8000", 1)}, ""},
		{"dns:port", []*pb.ReportLoadRequest{id("vllm-0.vllm.ns.svc:8000", 1)}, ""},
		{"no port", []*pb.ReportLoadRequest{id("10.0.0.1", 1)},
			`first report of a stream: invalid load report: address "10.0.0.1" is not host:port (missing port in address)`},
		{"port 0", []*pb.ReportLoadRequest{id("10.0.0.1:0", 1)}, `port "0" is not a number in 1-65535`},
		{"bad host", []*pb.ReportLoadRequest{id("gpu_1:8000", 1)}, `host "gpu_1" contains '_'`},
		{"seq up and equal", []*pb.ReportLoadRequest{id("a:1", 1), {Seq: 2}, {Seq: 2}, {Seq: 9}}, ""},
		{"seq unset", []*pb.ReportLoadRequest{id("a:1", 0), {}, {}}, ""},
		{"seq backwards", []*pb.ReportLoadRequest{id("a:1", 5), {Seq: 6}, {Seq: 4}},
			"report seq 4 is below the stream's last seq 6: seq must not decrease on a stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := reportErr(t, load, tc.msgs...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want InvalidArgument with %q", err, tc.want)
			}
		})
	}
}

// TestIdentityFlaps: streams taking over an instance id whose stream is
// still open are counted each time and logged once per server.FlapWindow, the
// line counting the takeovers since the last one.
func TestIdentityFlaps(t *testing.T) {
	clock := testwait.NewClock()
	var logs testwait.SyncBuffer
	d := obsStart(t, func(c *Config) {
		c.Server.Now, c.Server.Logger = clock.Now, slog.New(slog.NewJSONHandler(&logs, nil))
	})
	_, load, _ := obsClients(t, d)
	open := func(addr string) {
		obsConnect(t, load).report(&pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: "i", Address: addr})
	}
	const msg = "report stream took over an instance id whose stream was still open: a reconnect, or two instances sharing one id"
	open("10.0.0.1:1") // the first stream: no takeover
	if n, _ := obsValueOK(obsScrape(t, d), "prefixroute_instance_identity_flaps_total", map[string]string{"pool": "p", "deployment": "d"}); n != 0 {
		t.Fatalf("%v flaps before any takeover", n)
	}
	open("10.0.0.2:1")
	open("10.0.0.1:1")
	open("10.0.0.2:1")
	lines := logs.Logged(t, msg)
	if len(lines) != 1 || lines[0]["previous_address"] != "10.0.0.1:1" || lines[0]["address"] != "10.0.0.2:1" {
		t.Fatalf("%d lines (%v), want one naming both addresses", len(lines), lines)
	}
	clock.Advance(server.FlapWindow)
	open("10.0.0.1:1")
	lines = logs.Logged(t, msg)
	if len(lines) != 2 || lines[1]["takeovers_since_last_line"] != float64(3) {
		t.Fatalf("after the window: %v, want a second line counting 3 takeovers", lines)
	}
	if n := obsValue(t, obsScrape(t, d), "prefixroute_instance_identity_flaps_total", map[string]string{"pool": "p", "deployment": "d"}); n != 4 {
		t.Errorf("flaps %v, want 4", n)
	}
}

// TestPickInputChecks: an audit level the API does not define and a
// prompt_tokens below what the hashes cover (at the smallest block size in
// force) are InvalidArgument naming the numbers; at the edge they pass.
func TestPickInputChecks(t *testing.T) {
	d := obsStart(t, nil)
	pick, load, _ := obsClients(t, d)
	obsConnect(t, load).report(&pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: "i", Address: "10.0.0.1:1"})
	four := []uint64{1, 2, 3, 4}
	tests := []struct {
		name string
		req  *pb.PickRequest
		want string // "" = OK
	}{
		{"audit none", &pb.PickRequest{Pool: "p", Audit: pb.AuditLevel_AUDIT_LEVEL_NONE}, ""},
		{"audit 4", &pb.PickRequest{Pool: "p", Audit: 4}, "audit is 4, not an AuditLevel; want 0 (unspecified: full), 1 (full), 2 (chosen) or 3 (none)"},
		{"audit -1", &pb.PickRequest{Pool: "p", Audit: -1}, "audit is -1"},
		{"prompt covers the hashes", &pb.PickRequest{Pool: "p", PrefixHashes: four, PromptTokens: 64}, ""},
		{"prompt one short", &pb.PickRequest{Pool: "p", PrefixHashes: four, PromptTokens: 63},
			"prompt_tokens is 63, fewer than the 64 tokens its 4 prefix_hashes cover (4 blocks × 16-token blocks)"},
		{"prompt unset", &pb.PickRequest{Pool: "p", PrefixHashes: four}, "prompt_tokens is 0, fewer than the 64 tokens"},
		{"no hashes", &pb.PickRequest{Pool: "p"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pick.Pick(context.Background(), tc.req)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want InvalidArgument with %q", err, tc.want)
			}
		})
	}
	// An instance reporting 8-token blocks: 4 hashes cover 32 tokens.
	obsConnect(t, load).report(&pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: "j", Address: "10.0.0.2:1", BlockSizeTokens: 8})
	if _, err := pick.Pick(context.Background(), &pb.PickRequest{Pool: "p", PrefixHashes: four, PromptTokens: 32}); err != nil {
		t.Errorf("32 tokens at 8-token blocks: %v", err)
	}
}
