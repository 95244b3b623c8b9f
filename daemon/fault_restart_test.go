package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/server"
)

// freeLoopbackAddr returns a loopback address no one listens on now.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// countOK returns how many instances of pool the daemon lists as OK.
func countOK(ctx context.Context, admin pb.AdminServiceClient, pool string) int {
	r, err := admin.ListInstances(ctx, &pb.ListInstancesRequest{Pool: pool})
	if err != nil {
		return 0
	}
	n := 0
	for _, in := range r.GetInstances() {
		if in.GetState() == pb.InstanceState_INSTANCE_STATE_OK {
			n++
		}
	}
	return n
}

// TestRestartUnder1000Reconnects: 1,000 instances (pkg/client Reporters,
// over 10 shared connections: the race detector bounds a process to 8,128
// goroutines) report into a daemon that is shut down and started again on
// the same address and data dir. Every instance is listed OK again within
// a bounded poll, and the weights acknowledged before the restart are
// those in force after it.
func TestRestartUnder1000Reconnects(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const instances, conns = 1000, 10
	addr, dir := freeLoopbackAddr(t), t.TempDir()
	cfg := Config{Listen: addr, HTTPListen: "off", Server: server.Options{DataDir: dir, ReportInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()

	ccs := make([]*grpc.ClientConn, conns)
	for i := range ccs {
		if ccs[i], err = client.Dial(addr); err != nil {
			t.Fatal(err)
		}
		defer ccs[i].Close()
	}
	reporters := make([]*client.Reporter, instances)
	for i := range reporters {
		reporters[i], err = client.NewReporter(ccs[i%conns], client.ReporterOptions{
			Pool: "chat", Deployment: fmt.Sprint("d", i%2), InstanceID: fmt.Sprint("i-", i), Address: fmt.Sprint("10.0.0.1:", 1000+i),
			Load:     func() client.Load { return client.Load{PrefillTokensPerSecond: 5000} },
			Interval: time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		var wg sync.WaitGroup
		for _, r := range reporters {
			wg.Go(func() {
				if err := r.Close(); err != nil {
					t.Errorf("Reporter.Close: %v", err)
				}
			})
		}
		wg.Wait()
	}()
	admin := pb.NewAdminServiceClient(ccs[0])
	allOK := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return countOK(ctx, admin, "chat") == instances
	}
	t.Logf("all %d connected in %v", instances, testwait.EventuallyWithin(t, time.Minute, "every instance OK after the first start", allOK))
	want := map[string]float64{"d0": 1, "d1": 3}
	if _, err := admin.SetWeights(context.Background(), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: want}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	must(t, d.Shutdown(ctx))
	cancel()
	if d, err = Start(cfg); err != nil {
		t.Fatalf("restart on %s: %v", addr, err)
	}
	t.Logf("all %d reconnected in %v after the restart", instances, testwait.EventuallyWithin(t, time.Minute, "every instance OK after the restart", allOK))
	w, err := admin.GetWeights(context.Background(), &pb.GetWeightsRequest{Pool: "chat"})
	if err != nil || w.GetVersion() != 1 || !maps.Equal(w.GetWeights(), want) {
		t.Fatalf("weights after the restart: %v %v", w, err)
	}
}
