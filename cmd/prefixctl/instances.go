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
	"github.com/prefixroute/prefixroute/pkg/client"
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
			renderInstances(c.stdout, pos[0], resp)
			return nil
		}
	}
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
	}
	return "unknown"
}

// queueCell is the instance's queue in ms: its own estimate when it
// reports one, else its queued prefill tokens at its reported throughput,
// marked "~" (estimated reports whether it is); "-" when neither is known.
func queueCell(in *pb.InstanceStatus) (cell string, estimated bool) {
	switch tps := in.GetPrefillTokensPerSecond(); {
	case in.QueueMs != nil:
		return fmtMs(in.GetQueueMs()), false
	case in.GetQueuedPrefillTokens() == 0:
		return fmtMs(0), false
	case tps > 0:
		return "~" + fmtMs(float64(in.GetQueuedPrefillTokens())/tps*1000), true
	}
	return "-", false
}

// renderInstances prints ListInstances as a table of the connected
// instances by deployment, then one line per disconnected instance.
func renderInstances(w io.Writer, pool string, r *pb.ListInstancesResponse) {
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
	var gone []*pb.InstanceStatus
	for _, in := range r.GetInstances() {
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
		queue, est := queueCell(in)
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
	if estimated {
		fmt.Fprintln(w, "~ QUEUE: queued prefill tokens / throughput (the instance reports no queue_ms)")
	}
	if guessed {
		fmt.Fprintln(w, "~ CACHED: guessed from the requests routed there (no cache events)")
	}
}
