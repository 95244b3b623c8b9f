package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// LiveOptions configures RunLive. Zero fields take the defaults stated.
type LiveOptions struct {
	// Addr is the gRPC address of a running prefixrouted. Required; it must
	// be a loopback address (127.0.0.0/8, ::1 or localhost).
	Addr string
	// Replicas are the addresses of further replicas of the same cluster
	// (prefixrouted --nats), loopback too. With them, gateway workers and
	// instances are spread round-robin over Addr and Replicas (worker i and
	// instance k talk to replica i mod n and k mod n); configuration goes
	// through Addr, and setup waits until every replica lists every instance.
	Replicas []string
	// Pool is the pool to use on the router. Default the scenario's.
	Pool string
	// Duration is how long requests arrive, in wall-clock time. Default 10s;
	// never more than the scenario's duration / Speed.
	Duration time.Duration
	// Speed is how many virtual seconds pass per wall-clock second: the
	// instances run Speed times faster and report Speed times the
	// throughput, and the policy's millisecond parameters are divided by
	// Speed. Default 1. The router's round trips (Pick, the report
	// interval its acks ask for, at least 25 ms here) are real time, so
	// they weigh Speed times more in virtual time.
	Speed float64
	// MaxRequests bounds the requests sent. Default 100000.
	MaxRequests int
	// Workers is the number of concurrent gateway workers calling Pick.
	// Default 8.
	Workers int
	// Logger receives the Reporters' logs. Default: discarded.
	Logger *slog.Logger
	// Progress is called once per virtual second, as for Run.
	Progress func(done, total time.Duration)
	// Seed replaces the scenario's seed when non-zero (the workload's).
	Seed uint64
}

// LiveStats is what a live run measured on the gRPC side.
type LiveStats struct {
	Addr                          string
	Speed                         float64
	Picks, PickErrors             int
	FirstError                    string
	PickP50Ms, PickP99Ms, PickMax float64
	// RouteP50Ms and RouteP99Ms are the time from a request's arrival to
	// its queueing on the chosen instance (Pick's round trip, the gateway
	// worker's and the loop's scheduling), in virtual ms: what a live TTFT
	// holds that a simulated one does not.
	RouteP50Ms, RouteP99Ms       float64
	Reports, Acks, ReportStreams uint64
	// Unfinished counts requests still queued or in a Pick call when the
	// run stopped at its deadline.
	Unfinished int
}

// CheckLoopback returns an error unless addr's host is a loopback address.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("live address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("live address %q: only loopback addresses (127.0.0.0/8, ::1, localhost) are allowed", addr)
}

// routed is a request back from a gateway worker.
type routed struct {
	r    *Request
	inst int
	err  error
	lat  time.Duration
}

// liveLoad is one instance's latest load, read by its Reporter.
type liveLoad struct {
	mu   sync.Mutex
	load client.Load
}

func (l *liveLoad) get() client.Load {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.load
}

// RunLive runs one variant of the scenario against a real prefixrouted over
// gRPC, in wall-clock time scaled by Speed: each emulated instance streams
// ReportLoad through a client.Reporter (with its cache events when the
// variant has them), gateway workers call Pick through a client.Picker, and
// the weight schedule is applied with AdminService.SetWeights. The policy
// is set with SetPolicy first. Baseline variants cannot run live. RunLive
// is not deterministic (it depends on timing); it is safe for concurrent
// use only with distinct pools.
func RunLive(ctx context.Context, sc *Scenario, variant string, opts LiveOptions) (*Result, error) {
	rc, err := sc.variantConfig(variant)
	if err != nil {
		return nil, err
	}
	if rc.variant.Baseline() {
		return nil, fmt.Errorf("variant %q is a simulator baseline; live mode needs the router", variant)
	}
	if o := rc.variant.Optimistic; o != nil && !*o {
		return nil, fmt.Errorf("variant %q is formula-only (optimistic: false), which only the simulator's router can be", variant)
	}
	for _, a := range append([]string{opts.Addr}, opts.Replicas...) {
		if err := CheckLoopback(a); err != nil {
			return nil, err
		}
	}
	opts.defaults()
	if opts.Pool != "" {
		scc := *sc
		scc.Pool = opts.Pool
		rc.sc = &scc
	}
	virtual := min(sc.Duration.D(), time.Duration(float64(opts.Duration)*opts.Speed))
	e, err := newEngine(rc, RunOptions{Duration: virtual, Progress: opts.Progress, Seed: opts.Seed}, true)
	if err != nil {
		return nil, err
	}
	if c, ok := e.wl.(io.Closer); ok {
		defer c.Close()
	}
	e.wl = &limited{Workload: e.wl, left: opts.MaxRequests}
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, a := range append([]string{opts.Addr}, opts.Replicas...) {
		conn, err := client.Dial(a)
		if err != nil {
			return nil, err
		}
		conns = append(conns, conn)
	}
	lr := &liveRun{e: e, rc: rc, opts: opts, admin: pb.NewAdminServiceClient(conns[0]), ctx: ctx}
	if err := lr.setup(conns); err != nil {
		return nil, errors.Join(err, lr.closeReporters())
	}
	start := time.Now()
	err = lr.loop(start)
	if err := errors.Join(err, lr.closeReporters()); err != nil {
		return nil, err
	}
	res := e.result(time.Since(start))
	res.Live = lr.stats()
	return res, nil
}

func (o *LiveOptions) defaults() {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if !(o.Speed > 0) {
		o.Speed = 1
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = 100000
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// limited ends a workload after a number of requests.
type limited struct {
	Workload
	left int
}

func (l *limited) Next() (*Request, error) {
	if l.left <= 0 {
		return nil, nil
	}
	l.left--
	return l.Workload.Next()
}

// liveRun is the state of one RunLive.
type liveRun struct {
	e         *engine
	rc        *runConfig
	opts      LiveOptions
	ctx       context.Context
	admin     pb.AdminServiceClient
	pickers   []*client.Picker // one per replica
	reporters []*client.Reporter
	loads     []*liveLoad
	index     map[string]int
	rep       state.Report

	mu          sync.Mutex
	latencies   []float64
	routeDelays []float64 // arrival to queued on the instance, virtual ms
	errs        int
	firstErr    string
	picks       int
	unfinished  int
}

// setup sets the policy and the first weights, starts one Reporter per
// instance (instance k on replica k mod n) and waits until every replica
// lists them all.
func (lr *liveRun) setup(conns []*grpc.ClientConn) error {
	sc, speed := lr.rc.sc, lr.opts.Speed
	ctx, cancel := context.WithTimeout(lr.ctx, 10*time.Second)
	defer cancel()
	if _, err := lr.admin.SetPolicy(ctx, &pb.SetPolicyRequest{Pool: sc.Pool, Policy: policyProto(lr.rc.policy, speed)}); err != nil {
		return fmt.Errorf("SetPolicy: %w", err)
	}
	if err := lr.setWeights(lr.rc.weights[0].Weights, 0); err != nil {
		return err
	}
	lr.e.onWeights = lr.setWeights
	lr.index = make(map[string]int)
	for k, in := range lr.e.insts {
		lr.index[in.ID] = k
		l := &liveLoad{}
		lr.loads = append(lr.loads, l)
		lr.publish(k)
		r, err := client.NewReporter(conns[k%len(conns)], client.ReporterOptions{Pool: sc.Pool, Deployment: sc.Deployments[in.Deployment].Name,
			InstanceID: in.ID, Address: in.ID + ".sim:8000", Load: l.get, CacheEvents: lr.rc.cacheEvents,
			Interval: max(time.Duration(float64(lr.rc.reportInterval)/speed), 25*time.Millisecond), Logger: lr.opts.Logger})
		if err != nil {
			return err
		}
		lr.reporters = append(lr.reporters, r)
	}
	for i, conn := range conns {
		if err := lr.waitInstances(ctx, pb.NewAdminServiceClient(conn), i); err != nil {
			return err
		}
		p, err := client.NewPicker(conn, client.PickerOptions{Pool: sc.Pool, BlockSize: sc.BlockTokens, Timeout: 2 * time.Second})
		if err != nil {
			return err
		}
		lr.pickers = append(lr.pickers, p)
	}
	return nil
}

// waitInstances waits until replica i lists every instance as ok.
func (lr *liveRun) waitInstances(ctx context.Context, admin pb.AdminServiceClient, i int) error {
	for {
		resp, err := admin.ListInstances(ctx, &pb.ListInstancesRequest{Pool: lr.rc.sc.Pool})
		ok := 0
		for _, st := range resp.GetInstances() {
			if st.GetState() == pb.InstanceState_INSTANCE_STATE_OK {
				ok++
			}
		}
		if err == nil && ok == len(lr.e.insts) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d instances to report on replica %d (ListInstances: %v, %d ok): %w",
				len(lr.e.insts), i, err, ok, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (lr *liveRun) setWeights(w map[string]float64, _ uint64) error {
	ctx, cancel := context.WithTimeout(lr.ctx, 5*time.Second)
	defer cancel()
	if _, err := lr.admin.SetWeights(ctx, &pb.SetWeightsRequest{Pool: lr.rc.sc.Pool, Weights: w}); err != nil {
		return fmt.Errorf("SetWeights: %w", err)
	}
	return nil
}

// publish makes instance k's current load what its Reporter sends next,
// and hands it the cache events since the last publish.
func (lr *liveRun) publish(k int) {
	in, speed := lr.e.insts[k], lr.opts.Speed
	in.report(lr.e.now, &lr.rep)
	rep := &lr.rep
	l := client.Load{RunningRequests: rep.RunningRequests, WaitingRequests: rep.WaitingRequests,
		QueuedPrefillTokens: rep.QueuedPrefillTokens, QueueMs: rep.QueueMs / speed, HasQueueMs: rep.HasQueueMs,
		KVCacheUsage: rep.KVCacheUsage, KVCapacityBlocks: rep.KVCapacityBlocks,
		PrefillTokensPerSecond: rep.PrefillTokensPerSecond * speed, BlockSizeTokens: rep.BlockSizeTokens}
	lr.loads[k].mu.Lock()
	lr.loads[k].load = l
	lr.loads[k].mu.Unlock()
	if len(lr.reporters) > k {
		lr.reporters[k].Removed(rep.Removed...)
		lr.reporters[k].Stored(rep.Stored...)
	}
}

// closeReporters closes every Reporter at once and returns their errors
// joined.
func (lr *liveRun) closeReporters() error {
	var wg sync.WaitGroup
	errs := make([]error, len(lr.reporters))
	for i, r := range lr.reporters {
		wg.Go(func() { errs[i] = r.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (lr *liveRun) stats() *LiveStats {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	st := &LiveStats{Addr: lr.opts.Addr, Speed: lr.opts.Speed, Picks: lr.picks, PickErrors: lr.errs, FirstError: lr.firstErr,
		Unfinished: lr.unfinished}
	slices.Sort(lr.latencies)
	st.PickP50Ms, st.PickP99Ms = percentile(lr.latencies, 0.5), percentile(lr.latencies, 0.99)
	slices.Sort(lr.routeDelays)
	st.RouteP50Ms, st.RouteP99Ms = percentile(lr.routeDelays, 0.5), percentile(lr.routeDelays, 0.99)
	if n := len(lr.latencies); n > 0 {
		st.PickMax = lr.latencies[n-1]
	}
	for _, r := range lr.reporters {
		s := r.Stats()
		st.Reports, st.Acks, st.ReportStreams = st.Reports+s.Reports, st.Acks+s.Acks, st.ReportStreams+s.Streams
	}
	return st
}
