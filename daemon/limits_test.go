package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// limitClients are the clients of one daemon of the limits tests.
type limitClients struct {
	pick  pb.PickServiceClient
	load  pb.LoadServiceClient
	admin pb.AdminServiceClient
}

// ctxT is a context ending with the test, within 10 s.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sendReport sends one report on a new stream and returns the ack's error;
// the stream stays open until the test ends.
func sendReport(t *testing.T, c limitClients, r *pb.ReportLoadRequest) error {
	st, err := c.load.ReportLoad(ctxT(t))
	if err != nil {
		return err
	}
	if r.PrefillTokensPerSecond == 0 {
		r.PrefillTokensPerSecond = 10000
	}
	if err := st.Send(r); err != nil {
		_, err = st.Recv()
		return err
	}
	_, err = st.Recv()
	return err
}

func ident(pool, dep, id string) *pb.ReportLoadRequest {
	return &pb.ReportLoadRequest{Pool: pool, Deployment: dep, InstanceId: id, Address: id + ":8000", Seq: 1}
}

// pickOfSize is a Pick whose encoding is exactly n bytes (n >= 16).
func pickOfSize(n int) *pb.PickRequest {
	r := &pb.PickRequest{Pool: "chat"}
	for k := 0; proto.Size(r) < n; k++ {
		r.RequestId = strings.Repeat("x", k)
	}
	return r
}

// TestLimitEdges: each limit lets through a request exactly at it and
// answers one past it with the documented code and a message naming the
// limit.
func TestLimitEdges(t *testing.T) {
	hashes := func(n int) []uint64 {
		h := make([]uint64, n)
		for i := range h {
			h[i] = uint64(i + 1)
		}
		return h
	}
	tests := []struct {
		name     string
		mutate   func(*Config)
		setup    func(t *testing.T, c limitClients)
		at, over func(t *testing.T, c limitClients) error
		atCode   codes.Code // what the call at the limit answers (not the limit's code)
		code     codes.Code
		msg      string
	}{{
		name:   "message size",
		mutate: func(c *Config) { c.MaxRecvMsgBytes = 2048 },
		at:     func(t *testing.T, c limitClients) error { _, err := c.pick.Pick(ctxT(t), pickOfSize(2048)); return err },
		over:   func(t *testing.T, c limitClients) error { _, err := c.pick.Pick(ctxT(t), pickOfSize(2049)); return err },
		atCode: codes.NotFound, code: codes.ResourceExhausted, msg: "larger than max (2049 vs. 2048)",
	}, {
		name: "metadata per call", // grpc-go clients learn the bound from SETTINGS and refuse to send
		at: func(t *testing.T, c limitClients) error {
			_, err := c.admin.ListPools(metadata.AppendToOutgoingContext(ctxT(t), "x-big", strings.Repeat("a", 60<<10)), &pb.ListPoolsRequest{})
			return err
		},
		over: func(t *testing.T, c limitClients) error {
			_, err := c.admin.ListPools(metadata.AppendToOutgoingContext(ctxT(t), "x-big", strings.Repeat("a", 64<<10)), &pb.ListPoolsRequest{})
			return err
		},
		code: codes.Internal, msg: "header list size to send violates the maximum size (65536 bytes)",
	}, {
		name:   "prefix hashes per pick",
		mutate: func(c *Config) { c.Server.Limits.MaxPrefixBlocks = 4 },
		setup:  func(t *testing.T, c limitClients) { must(t, sendReport(t, c, ident("chat", "a", "a-1"))) },
		at: func(t *testing.T, c limitClients) error {
			_, err := c.pick.Pick(ctxT(t), &pb.PickRequest{Pool: "chat", PrefixHashes: hashes(4), PromptTokens: 64, Seed: new(uint64)})
			return err
		},
		over: func(t *testing.T, c limitClients) error {
			_, err := c.pick.Pick(ctxT(t), &pb.PickRequest{Pool: "chat", PrefixHashes: hashes(5), PromptTokens: 80})
			return err
		},
		code: codes.InvalidArgument, msg: "the limit is 4",
	}, {
		name:   "block events per report",
		mutate: func(c *Config) { c.Server.Limits.MaxBlockEvents = 4 },
		at: func(t *testing.T, c limitClients) error {
			r := ident("chat", "a", "a-1")
			r.StoredBlockHashes, r.ReportsCacheEvents = hashes(3), true
			r.RemovedBlockHashes = hashes(1)
			return sendReport(t, c, r)
		},
		over: func(t *testing.T, c limitClients) error {
			r := ident("chat", "a", "a-2")
			r.StoredBlockHashes, r.ReportsCacheEvents = hashes(5), true
			return sendReport(t, c, r)
		},
		code: codes.InvalidArgument, msg: "the limit is 4 per report",
	}, {
		name:   "instances per pool",
		mutate: func(c *Config) { c.Server.Limits.MaxInstancesPerPool = 2 },
		setup:  func(t *testing.T, c limitClients) { must(t, sendReport(t, c, ident("chat", "a", "a-1"))) },
		at:     func(t *testing.T, c limitClients) error { return sendReport(t, c, ident("chat", "b", "b-1")) },
		over:   func(t *testing.T, c limitClients) error { return sendReport(t, c, ident("chat", "a", "a-3")) },
		code:   codes.ResourceExhausted, msg: "2 instances, the limit is 2",
	}, {
		name:   "pools",
		mutate: func(c *Config) { c.Server.Limits.MaxPools = 2 },
		setup:  func(t *testing.T, c limitClients) { must(t, sendReport(t, c, ident("p1", "a", "a-1"))) },
		at: func(t *testing.T, c limitClients) error {
			_, err := c.admin.SetWeights(ctxT(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "p2", Weights: map[string]float64{"a": 1}})
			return err
		},
		over: func(t *testing.T, c limitClients) error { return sendReport(t, c, ident("p3", "a", "a-1")) },
		code: codes.ResourceExhausted, msg: "2 pools, the limit is 2",
	}, {
		name:   "pools, by SetWeights",
		mutate: func(c *Config) { c.Server.Limits.MaxPools = 1 },
		at: func(t *testing.T, c limitClients) error {
			_, err := c.admin.SetPolicy(ctxT(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "p1", Policy: &pb.Policy{}})
			return err
		},
		over: func(t *testing.T, c limitClients) error {
			_, err := c.admin.SetWeights(ctxT(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "p2", Weights: map[string]float64{"a": 1}})
			return err
		},
		code: codes.ResourceExhausted, msg: "1 pools, the limit is 1",
	}, {
		name:   "report streams per daemon",
		mutate: func(c *Config) { c.Transport.MaxReportStreams = 2 },
		setup:  func(t *testing.T, c limitClients) { must(t, sendReport(t, c, ident("chat", "a", "a-1"))) },
		at:     func(t *testing.T, c limitClients) error { return sendReport(t, c, ident("chat", "a", "a-2")) },
		over:   func(t *testing.T, c limitClients) error { return sendReport(t, c, ident("chat", "a", "a-3")) },
		code:   codes.ResourceExhausted, msg: "2 report streams and batched instances open, the limit is 2 (--max-report-streams)",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := obsStart(t, tc.mutate)
			p, l, a := obsClients(t, d)
			c := limitClients{p, l, a}
			if tc.setup != nil {
				tc.setup(t, c)
			}
			if err := tc.at(t, c); status.Code(err) != tc.atCode {
				t.Fatalf("at the limit: %v, want %v", err, tc.atCode)
			}
			err := tc.over(t, c)
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("past the limit: %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestReportRateLimit: a stream sending faster than its token bucket
// allows ends with ResourceExhausted naming the limit, once the burst is
// spent; another stream is unaffected.
func TestReportRateLimit(t *testing.T) {
	d := obsStart(t, func(c *Config) { c.Transport.ReportsPerSecond, c.Transport.ReportBurst = 2, 5 })
	_, load, _ := obsClients(t, d)
	st := obsConnect(t, load)
	var err error
	sent := 0
	for ; sent < 20 && err == nil; sent++ {
		r := &pb.ReportLoadRequest{Seq: uint64(sent + 1), PrefillTokensPerSecond: 1000}
		if sent == 0 {
			r = ident("chat", "a", "a-1")
		}
		if err = st.stream.Send(r); err == nil {
			_, err = st.stream.Recv()
		} else {
			_, err = st.stream.Recv()
		}
	}
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "2 reports/s (burst 5) per stream") {
		t.Fatalf("after %d reports: %v", sent, err)
	}
	if sent < 6 || sent > 8 { // 6 on time; a slow machine earns a token or two more
		t.Errorf("refused report %d; the burst is 5", sent)
	}
	if err := sendReport(t, limitClients{load: load}, ident("chat", "a", "a-2")); err != nil {
		t.Errorf("a second stream: %v", err)
	}
	if m, ok := obsSeries(obsScrape(t, d), "prefixroute_limit_hits_total", map[string]string{"limit": "reports_per_second"}); !ok ||
		m.GetCounter().GetValue() != 1 {
		t.Errorf("prefixroute_limit_hits_total{limit=reports_per_second}: %v", m)
	}
}

// TestFirstReportTimeout: a stream that never sends is closed with
// DeadlineExceeded after FirstReportTimeout, and its slot under
// MaxReportStreams is free again.
func TestFirstReportTimeout(t *testing.T) {
	d := obsStart(t, func(c *Config) {
		c.Transport.FirstReportTimeout, c.Transport.MaxReportStreams = 200*time.Millisecond, 1
	})
	_, load, _ := obsClients(t, d)
	st, err := load.ReportLoad(ctxT(t))
	must(t, err)
	start := time.Now()
	_, err = st.Recv()
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no first report within 200ms") {
		t.Fatalf("silent stream: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("closed after %v", el)
	}
	testwait.Eventually(t, "the stream slot", func() bool { return d.srv.OpenReportStreams() == 0 })
	if err := sendReport(t, limitClients{load: load}, ident("chat", "a", "a-1")); err != nil {
		t.Errorf("a stream after the timeout: %v", err)
	}
}

// TestConnectionLimits: past MaxConcurrentStreams on one connection, a new
// stream waits (the client's deadline ends it); past MaxConnections a new
// connection waits to be accepted. Both proceed once room is made.
func TestConnectionLimits(t *testing.T) {
	d := obsStart(t, func(c *Config) { c.MaxConcurrentStreams, c.Transport.MaxConnections = 2, 1 })
	cc1, err := grpc.NewClient(d.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	c1 := limitClients{load: pb.NewLoadServiceClient(cc1), admin: pb.NewAdminServiceClient(cc1)}
	for i := range 2 {
		must(t, sendReport(t, c1, ident("chat", "a", fmt.Sprint("a-", i))))
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c1.admin.ListPools(short, &pb.ListPoolsRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("third stream on the connection: %v, want the client's DeadlineExceeded", err)
	}
	cc2, err := grpc.NewClient(d.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer cc2.Close()
	short2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	admin2 := pb.NewAdminServiceClient(cc2)
	if _, err := admin2.ListPools(short2, &pb.ListPoolsRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("second connection: %v, want DeadlineExceeded while it waits", err)
	}
	cc1.Close()
	if _, err := admin2.ListPools(ctxT(t), &pb.ListPoolsRequest{}); err != nil {
		t.Errorf("second connection once the first closed: %v", err)
	}
}
