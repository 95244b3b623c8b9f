package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/scheduler"
)

// pools is 'prefixctl pools'.
func (c *cli) pools(fs *pflag.FlagSet) runner {
	return func(pos []string) error {
		return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.ListPoolsResponse, error) {
			return a.ListPools(ctx, &pb.ListPoolsRequest{})
		}, renderPools)
	}
}

// instances is 'prefixctl instances POOL [--wait N]'.
func (c *cli) instances(fs *pflag.FlagSet) runner {
	wait := fs.Int("wait", 0, "wait until at least `N` instances are ok")
	waitTimeout := fs.Duration("wait-timeout", 30*time.Second, "give up waiting after `D`")
	return func(pos []string) error {
		if *wait < 0 || *waitTimeout <= 0 {
			return usagef("--wait %d --wait-timeout %v: want N >= 0 and a positive duration", *wait, *waitTimeout)
		}
		admin, err := c.admin()
		if err != nil {
			return err
		}
		deadline := time.Now().Add(*waitTimeout)
		for {
			ctx, cancel := c.call()
			resp, err := admin.ListInstances(ctx, &pb.ListInstancesRequest{Pool: pos[0]})
			cancel()
			ok := 0
			for _, in := range resp.GetInstances() {
				if in.GetState() == pb.InstanceState_INSTANCE_STATE_OK {
					ok++
				}
			}
			// While waiting, a sidecar that is still starting and a pool that
			// does not exist yet are worth waiting for.
			waiting := *wait > 0 && time.Now().Before(deadline) && c.ctx.Err() == nil &&
				(err == nil && ok < *wait || client.Unreachable(err) || status.Code(err) == codes.NotFound)
			if waiting {
				select {
				case <-c.ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			if err != nil {
				return err
			}
			if ok < *wait {
				return &exitError{code: exitRefused, msg: fmt.Sprintf(
					"gave up after %v: %d of the %d instances wanted are ok in pool %s (see 'prefixctl instances %s')",
					*waitTimeout, ok, *wait, pos[0], shellWord(pos[0]))}
			}
			if c.output == "json" {
				return writeJSON(c.stdout, resp)
			}
			renderInstances(c.stdout, pos[0], resp, c.poolPolicy(admin, pos[0]))
			return nil
		}
	}
}

// poolPolicy is the pool's policy in force, or nil when it cannot be
// read (the QUEUE column then shows only reported queue_ms).
func (c *cli) poolPolicy(admin pb.AdminServiceClient, pool string) *scheduler.Policy {
	ctx, cancel := c.call()
	defer cancel()
	resp, err := admin.GetPolicy(ctx, &pb.GetPolicyRequest{Pool: pool})
	if err != nil {
		return nil
	}
	p, err := protoconv.MergePolicy(scheduler.DefaultPolicy(), resp.GetPolicy())
	if err != nil {
		return nil
	}
	return &p
}

// renderPools prints ListPools as a table.
func renderPools(w io.Writer, r *pb.ListPoolsResponse) {
	if len(r.GetPools()) == 0 {
		fmt.Fprintln(w, "no pools yet: a pool appears when an instance reports into it, or when its")
		fmt.Fprintln(w, "weights or policy are set with --create")
		return
	}
	t := newTable(nameCol("POOL", 12), numCol("DEPLOYMENTS"), numCol("INSTANCES"), textCol("WEIGHTS"))
	for _, p := range r.GetPools() {
		weights := "never set"
		if v := p.GetWeightsVersion(); v > 0 {
			weights = fmt.Sprintf("version %d", v)
		}
		t.add(p.GetPool(), fmt.Sprint(p.GetDeployments()), fmt.Sprint(p.GetInstances()), weights)
	}
	t.write(w)
}

// stateCell is an instance's state, with the report age when it matters.
func stateCell(in *pb.InstanceStatus) string {
	age := fmtAge(in.GetReportAgeMs())
	switch in.GetState() {
	case pb.InstanceState_INSTANCE_STATE_OK:
		return "ok"
	case pb.InstanceState_INSTANCE_STATE_STALE:
		return "stale " + age
	case pb.InstanceState_INSTANCE_STATE_DRAINING:
		return "draining"
	case pb.InstanceState_INSTANCE_STATE_DISCONNECTED:
		return "disconnected " + age // listed below the table
	case pb.InstanceState_INSTANCE_STATE_UNREACHABLE:
		return "unreach*" // explained below the table
	}
	return "unknown"
}

// queueCell is the instance's queue in ms as Pick sees it (the QUEUE of
// 'pick --explain'): scheduler.Standing with policy p, which takes its own
// queue_ms when it reports one, else its queued prefill tokens at its
// reported throughput or p's default_prefill_tokens_per_second, plus the
// tokens assigned to it since its last report. estimated is true unless
// the figure is the instance's queue_ms alone; "-" when it has no valid
// figures (or p is nil: the policy could not be read and the instance
// reports no queue_ms).
func queueCell(in *pb.InstanceStatus, p *scheduler.Policy) (cell string, estimated bool) {
	if p == nil {
		if in.QueueMs != nil {
			return fmtMs(in.GetQueueMs()), false
		}
		return "-", false
	}
	noWait := *p
	noWait.BatchWaitMs = 0
	si := scheduler.Instance{PrefillTokensPerSecond: in.GetPrefillTokensPerSecond(), QueueMs: in.GetQueueMs(),
		HasQueueMs: in.QueueMs != nil, QueuedPrefillTokens: in.GetQueuedPrefillTokens(), AssignedTokens: in.GetAssignedTokens()}
	_, ms, ok := scheduler.Standing(&noWait, &si)
	switch {
	case !ok:
		return "-", false
	case in.GetAssignedTokens() == 0 && (in.QueueMs != nil || in.GetQueuedPrefillTokens() == 0):
		return fmtMs(ms), false
	}
	return "~" + fmtMs(ms), true
}

// renderInstances prints ListInstances as a table of the connected
// instances by deployment, then one line per disconnected instance.
// p is the pool's policy (nil when it could not be read), for QUEUE.
func renderInstances(w io.Writer, pool string, r *pb.ListInstancesResponse, p *scheduler.Policy) {
	ok := 0
	for _, in := range r.GetInstances() {
		if in.GetState() == pb.InstanceState_INSTANCE_STATE_OK {
			ok++
		}
	}
	fmt.Fprintf(w, "pool %s: %d instances, %d ok\n", pool, len(r.GetInstances()), ok)
	if len(r.GetInstances()) == 0 {
		return
	}
	t := newTable(nameCol("INSTANCE", 10), nameCol("ADDRESS", 15), textCol("STATE"),
		numCol("QUEUE"), numCol("KV"), numCol("CACHED"), numCol("PREFILL"))
	guessed, estimated := false, false
	dep := ""
	var gone, unreachable []*pb.InstanceStatus
	for _, in := range r.GetInstances() {
		if in.GetState() == pb.InstanceState_INSTANCE_STATE_UNREACHABLE {
			unreachable = append(unreachable, in)
		}
		if in.GetState() == pb.InstanceState_INSTANCE_STATE_DISCONNECTED {
			gone = append(gone, in) // listed below the table, with their age
			continue
		}
		if dep == "" || in.GetDeployment() != dep {
			dep = in.GetDeployment()
			t.section("deployment " + dep)
		}
		cached := fmtBlocks(in.GetCachedBlocks())
		if !in.GetReportsCacheEvents() {
			cached, guessed = "~"+cached, true
		}
		queue, est := queueCell(in, p)
		estimated = estimated || est
		t.add("  "+in.GetInstanceId(), in.GetAddress(), stateCell(in), queue,
			fmtPct(in.GetKvCacheUsage()), cached, fmtTPS(in.GetPrefillTokensPerSecond()))
	}
	if dep != "" {
		t.write(w)
	}
	for _, in := range gone {
		fmt.Fprintf(w, "disconnected: %s (deployment %s, %s), no report for %s\n",
			in.GetInstanceId(), in.GetDeployment(), in.GetAddress(), fmtAge(in.GetReportAgeMs()))
	}
	for _, in := range unreachable {
		left := "its next report ends it"
		if ms := in.GetUnreachableBackoffLeftMs(); ms > 0 {
			left = fmt.Sprintf("back-off %s left", fmtAge(ms))
		}
		fmt.Fprintf(w, "* unreachable: %s after a failed connect, out of picks; %s\n", in.GetInstanceId(), left)
	}
	if estimated {
		fmt.Fprintln(w, "~ QUEUE: as Pick sees it: queued + newly routed tokens / throughput")
	}
	if guessed {
		fmt.Fprintln(w, "~ CACHED: guessed from the requests routed there (no cache events)")
	}
}
