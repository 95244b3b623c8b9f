package simlive

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
	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// Options configures RunLive. Zero fields take the defaults stated.
type Options struct {
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

// MinReportInterval keeps live reports under prefixrouted's default
// per-stream rate limit (50 reports/s).
const MinReportInterval = 25 * time.Millisecond

// publishesPerReport is how many times per report interval the loop
// publishes each instance's load to its Reporter when nothing else wakes
// it: a Reporter sends the latest published load, so this bounds its age
// at a quarter of the interval (a real engine's report is current when
// sent; a long prefill with no event in between would otherwise be
// reported as it stood when it began).
const publishesPerReport = 4

// ReportInterval is the wall-clock report interval of a scenario whose
// virtual one is virtual, played speed times faster: the interval the
// Reporters start with and the router's acks should ask for
// (prefixrouted --report-interval); never under MinReportInterval.
func ReportInterval(virtual time.Duration, speed float64) time.Duration {
	return max(time.Duration(float64(virtual)/max(speed, 1e-9)), MinReportInterval)
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
	r    *sim.Request
	inst int
	rep  int // the replica that picked it
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

// RunLive runs one variant of the scenario against real prefixrouted over
// gRPC, in wall-clock time scaled by Speed: each emulated instance streams
// ReportLoad through a client.Reporter (with its cache events when the
// variant has them), gateway workers call Pick through a client.Picker, and
// the weight schedule is applied with AdminService.SetWeights. The policy
// is set with SetPolicy first. A baseline variant (llm-d-style, random,
// round_robin, affinity) runs on the same wall-clock traffic with its
// picker in this process (sim.LocalRouter, no gRPC: Addr is not used),
// fed the instances' reports at the variant's report interval. RunLive
// is not deterministic (it depends on timing); it is safe for concurrent
// use only with distinct pools.
func RunLive(ctx context.Context, sc *sim.Scenario, variant string, opts Options) (*sim.Result, error) {
	opts.defaults()
	pool := opts.Pool
	if pool == "" {
		pool = sc.Pool
	}
	d, err := sim.NewDriven(sc, variant, sim.DrivenOptions{Pool: pool, Duration: time.Duration(float64(opts.Duration) * opts.Speed),
		MaxRequests: opts.MaxRequests, Seed: opts.Seed, Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	defer func() { _ = d.Close() }() // the workload's trace, opened for reading: nothing to lose
	if l := d.Local(); l != nil {
		return runLocal(ctx, d, l, opts)
	}
	for _, a := range append([]string{opts.Addr}, opts.Replicas...) {
		if err := CheckLoopback(a); err != nil {
			return nil, err
		}
	}
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
	lr := &liveRun{d: d, insts: d.Instances(), opts: opts, admin: pb.NewAdminServiceClient(conns[0]), ctx: ctx,
		target: sc.Workload.TTFTSLOMs, outcomes: d.Outcomes(), reportEvery: ReportInterval(d.ReportInterval(), opts.Speed) / publishesPerReport}
	if err := errors.Join(lr.setup(conns), lr.startOutcomes()); err != nil {
		return nil, errors.Join(err, lr.closeReporters(), lr.closeOutcomes())
	}
	start := time.Now()
	err = lr.loop(start)
	if err := errors.Join(err, lr.closeReporters(), lr.closeOutcomes()); err != nil {
		return nil, err
	}
	wall := time.Since(start)
	outs, err := lr.outcomeStats(lr.admin)
	if err != nil {
		return nil, err
	}
	res := d.Result(wall)
	res.Live = lr.stats()
	res.Live.Outcomes = outs
	return res, nil
}

func (o *Options) defaults() {
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

// liveRun is the state of one RunLive.
type liveRun struct {
	d       *sim.Driven
	insts   []sim.DrivenInstance
	opts    Options
	ctx     context.Context
	admin   pb.AdminServiceClient
	pickers []*client.Picker // one per replica
	// local is a baseline variant's picker (runLocal), nil otherwise; it
	// gets every instance's report once per reportEvery (wall clock),
	// localReports in all. For prefixrouted, the loop publishes every
	// instance's load to its Reporter at least once per reportEvery, so
	// that a report carries the queue as it is when sent, not as it was
	// at the loop's last event. The next is due at nextReport (the loop's
	// goroutine only).
	local        *sim.LocalRouter
	reportEvery  time.Duration
	nextReport   time.Time
	localReports uint64
	reporters    []*client.Reporter
	loads        []*liveLoad
	index        map[string]int
	rep          state.Report
	// target is every request's TTFT target, virtual ms (0: none);
	// outcomes whether the variant reports outcomes, through
	// outReporters (one per replica), picked holding the replica of each
	// request queued and not yet served (the loop's goroutine only).
	target       float64
	outcomes     bool
	outReporters []*client.OutcomeReporter
	picked       map[uint64]int

	mu          sync.Mutex
	latencies   []float64
	routeDelays []float64 // arrival to queued on the instance, virtual ms
	errs        int
	shed        int
	shedSLO     int
	firstErr    string
	picks       int
	unfinished  int
}

// setup sets the policy and the first weights, starts one Reporter per
// instance (instance k on replica k mod n) and waits until every replica
// lists them all.
func (lr *liveRun) setup(conns []*grpc.ClientConn) error {
	d, speed := lr.d, lr.opts.Speed
	ctx, cancel := context.WithTimeout(lr.ctx, 10*time.Second)
	defer cancel()
	if _, err := lr.admin.SetPolicy(ctx, &pb.SetPolicyRequest{Pool: d.Pool(), Policy: d.PolicyProto(speed), AllowNewPool: true}); err != nil {
		return fmt.Errorf("SetPolicy: %w", err)
	}
	if err := lr.setWeights(d.FirstWeights(), 0); err != nil {
		return err
	}
	d.OnWeights(lr.setWeights)
	lr.index = make(map[string]int)
	for k, in := range lr.insts {
		lr.index[in.ID] = k
		l := &liveLoad{}
		lr.loads = append(lr.loads, l)
		lr.publish(k)
		r, err := client.NewReporter(conns[k%len(conns)], client.ReporterOptions{Pool: d.Pool(), Deployment: in.Deployment,
			InstanceID: in.ID, Address: in.ID + ".sim:8000", Load: l.get, CacheEvents: d.CacheEvents(),
			Interval: ReportInterval(d.ReportInterval(), speed), Logger: lr.opts.Logger})
		if err != nil {
			return err
		}
		lr.reporters = append(lr.reporters, r)
	}
	for i, conn := range conns {
		if err := lr.waitInstances(ctx, pb.NewAdminServiceClient(conn), i); err != nil {
			return err
		}
		p, err := client.NewPicker(conn, client.PickerOptions{Pool: d.Pool(), BlockSize: d.BlockTokens(), Timeout: 2 * time.Second})
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
		resp, err := admin.ListInstances(ctx, &pb.ListInstancesRequest{Pool: lr.d.Pool()})
		ok := 0
		for _, st := range resp.GetInstances() {
			if st.GetState() == pb.InstanceState_INSTANCE_STATE_OK {
				ok++
			}
		}
		if err == nil && ok == len(lr.insts) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d instances to report on replica %d (ListInstances: %v, %d ok): %w",
				len(lr.insts), i, err, ok, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (lr *liveRun) setWeights(w map[string]float64, _ uint64) error {
	ctx, cancel := context.WithTimeout(lr.ctx, 5*time.Second)
	defer cancel()
	if _, err := lr.admin.SetWeights(ctx, &pb.SetWeightsRequest{Pool: lr.d.Pool(), Weights: w, AllowNewPool: true}); err != nil {
		return fmt.Errorf("SetWeights: %w", err)
	}
	return nil
}

// publish makes instance k's current load what its Reporter sends next,
// and hands it the cache events since the last publish.
func (lr *liveRun) publish(k int) {
	speed := lr.opts.Speed
	lr.d.Report(k, &lr.rep)
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

func (lr *liveRun) stats() *sim.LiveStats {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	st := &sim.LiveStats{Addr: lr.opts.Addr, Speed: lr.opts.Speed, Picks: lr.picks, PickErrors: lr.errs, FirstError: lr.firstErr,
		Unfinished: lr.unfinished, Shed: lr.shed, ShedSLO: lr.shedSLO}
	slices.Sort(lr.latencies)
	st.PickP50Ms, st.PickP99Ms = sim.Percentile(lr.latencies, 0.5), sim.Percentile(lr.latencies, 0.99)
	slices.Sort(lr.routeDelays)
	st.RouteP50Ms, st.RouteP99Ms = sim.Percentile(lr.routeDelays, 0.5), sim.Percentile(lr.routeDelays, 0.99)
	if n := len(lr.latencies); n > 0 {
		st.PickMax = lr.latencies[n-1]
	}
	st.Reports, st.Acks = lr.localReports, lr.localReports
	for _, r := range lr.reporters {
		s := r.Stats()
		st.Reports, st.Acks, st.ReportStreams = st.Reports+s.Reports, st.Acks+s.Acks, st.ReportStreams+s.Streams
	}
	return st
}
