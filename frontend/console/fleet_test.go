package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// The fleet of the console's tests: pool "chat" with deployment "a" (a-1,
// a-2, and a-3, which stops reporting and goes stale) and deployment "b"
// (b-1, b-2), reporting through pkg/client Reporters as 'prefixctl
// instance run' does, and a gateway picking three prompts in a loop.
const (
	fleetPool = "chat"
	// cachedPrompt is held, as its text-mode block hashes, by a-1 (which
	// streams its cache events); the gateway sends it, so b learns it once
	// picks route it there (b's instances send no cache events: the router
	// guesses their blocks from the picks it routed).
	cachedPrompt = "You are a careful assistant. Answer in English, cite your sources, and keep every answer under two hundred words. " +
		"The user is an operator of a routing sidecar who wants to know why a request went where it did."
	// explainPrompt is held by a-1 too, and never picked by the gateway:
	// only a holds it when the test explains it.
	explainPrompt = "Summarise the incident report below for the on-call engineer, listing the affected services first and the " +
		"remediation steps second, each as one short sentence."
)

type fleet struct {
	t       *testing.T
	sc      *servertest.Sidecar
	held    atomic.Bool // a-3 stops reporting
	picks   atomic.Int64
	stop    context.CancelFunc
	stopped sync.WaitGroup
}

// startFleet starts a daemon on the wall clock (the console's history is
// in real seconds), the reporters, and the gateway loop; all stop at the
// end of the test.
func startFleet(t *testing.T, opts ...servertest.Option) *fleet {
	t.Helper()
	f := &fleet{t: t}
	f.sc = servertest.Start(t, append([]servertest.Option{servertest.RealClock()}, opts...)...)
	return f
}

// run starts the reporters and the gateway on cc (the sidecar's
// connection, or one with credentials).
func (f *fleet) run(cc grpc.ClientConnInterface) {
	t := f.t
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	hasher := prefixhash.New(fleetPool, "")
	hashes := hasher.Text(nil, cachedPrompt)
	held := append(hasher.Text(nil, explainPrompt), hashes...)
	for _, in := range []struct {
		dep, id string
		queue   float64
		hold    bool
	}{{"a", "a-1", 4, false}, {"a", "a-2", 9, false}, {"a", "a-3", 2, true}, {"b", "b-1", 6, false}, {"b", "b-2", 12, false}} {
		queue, hold := in.queue, in.hold
		opts := client.ReporterOptions{Pool: fleetPool, Deployment: in.dep, InstanceID: in.id, Address: map[string]string{"a": "10.0.1.", "b": "10.0.2."}[in.dep] + in.id[2:] + ":8000",
			CacheEvents: in.id == "a-1", Logger: quiet, MinBackoff: 5 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
			Load: func() client.Load {
				return client.Load{RunningRequests: 3, WaitingRequests: 1, QueueMs: queue, HasQueueMs: true, KVCacheUsage: 0.2 + queue/40,
					KVCapacityBlocks: 20000, PrefillTokensPerSecond: 20000, BlockSizeTokens: 16}
			}}
		if hold {
			opts.Hold = f.held.Load
		}
		r, err := client.NewReporter(cc, opts)
		if err != nil {
			t.Fatal(err)
		}
		if in.id == "a-1" {
			r.Stored(held...)
		}
		t.Cleanup(func() {
			if err := r.Close(); err != nil {
				t.Errorf("Reporter.Close: %v", err)
			}
		})
	}
	picker, err := client.NewPicker(cc, client.PickerOptions{Pool: fleetPool, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	f.stopped.Add(1)
	go func() { // the gateway: ~100 picks/s of three prompts, one of them cached on a-1
		defer f.stopped.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		prompts := []string{cachedPrompt, cachedPrompt + " And one more thing.", "A prompt nobody has seen before, long enough for a block or two of text mode hashing."}
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := picker.Pick(ctx, client.Request{Text: prompts[i%len(prompts)]}); err == nil {
				f.picks.Add(1)
			}
		}
	}()
	t.Cleanup(f.halt)
	servertest.EventuallyOK(t, func() string {
		resp, err := f.sc.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: fleetPool})
		if err != nil {
			return err.Error()
		}
		if n := len(resp.GetInstances()); n != 5 {
			return fmt.Sprintf("%d instances reported, want 5", n)
		}
		for _, in := range resp.GetInstances() {
			if in.GetInstanceId() == "a-1" && in.GetCachedBlocks() < uint64(len(held)) {
				return fmt.Sprintf("a-1 holds %d blocks, want at least the %d of the two prompts", in.GetCachedBlocks(), len(held))
			}
		}
		if f.picks.Load() < 20 {
			return "fewer than 20 picks so far"
		}
		return ""
	})
}

// halt stops the gateway loop and waits for it.
func (f *fleet) halt() {
	if f.stop != nil {
		f.stop()
		f.stopped.Wait()
	}
}
