package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// The --cpu-per-call mode: the daemon's own CPU time per call, for an empty
// call (grpc.health.v1 Health/Check) and for Pick at each audit level, in
// blocks that alternate on one connection, while the instances keep
// reporting. The daemon is a separate process, so the client's cost (its
// marshalling and unmarshalling) is not in the figures.

// perCallBlock is the calls of one block: long enough that the daemon's
// CPU clock (ns, from schedstat) dwarfs the cost of reading it.
const perCallBlock = 500

// callCPU is the measured CPU of one kind of call.
type callCPU struct {
	name  string
	calls int
	cpu   time.Duration // the daemon's, over those calls' blocks
	wall  time.Duration
}

func (c callCPU) perCall() time.Duration { return c.cpu / time.Duration(max(1, c.calls)) }

// perCallResult is the whole measurement.
type perCallResult struct {
	empty      callCPU
	picks      []callCPU // NONE, CHOSEN, FULL
	background time.Duration
	idle       time.Duration // over which background was measured
}

// perCall measures n calls of each kind: for every audit level, blocks of
// empty calls and of Picks alternate, so that drift in the machine's load
// reaches both alike. The Pick asks for a 64-block prefix: a prompt's 32
// blocks the instances report and 32 of its own.
func (l *load) perCall(ctx context.Context, n int) (*perCallResult, error) {
	time.Sleep(l.c.warmUp)
	res := &perCallResult{empty: callCPU{name: "Health/Check (empty call)"}, idle: time.Second}
	c0 := l.daemon.schedCPU()
	time.Sleep(res.idle)
	res.background = l.daemon.schedCPU() - c0

	cc := l.pickConns[0]
	health, picker := healthpb.NewHealthClient(cc), pb.NewPickServiceClient(cc)
	hashes := make([]uint64, 0, 64)
	for b := range docBlocks {
		hashes = append(hashes, blockHash(0, 0, b))
	}
	for b := range 64 - docBlocks {
		hashes = append(hashes, 1<<63|uint64(b))
	}
	cctx := l.authed(ctx, gatewayToken)
	block := func(c *callCPU, call func() error) error {
		t0, cpu0 := time.Now(), l.daemon.schedCPU()
		for range perCallBlock {
			if err := call(); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
		}
		c.cpu += l.daemon.schedCPU() - cpu0
		c.wall += time.Since(t0)
		c.calls += perCallBlock
		return nil
	}
	empty := func() error { _, err := health.Check(cctx, &healthpb.HealthCheckRequest{}); return err }
	for _, audit := range []pb.AuditLevel{pb.AuditLevel_AUDIT_LEVEL_NONE, pb.AuditLevel_AUDIT_LEVEL_CHOSEN, pb.AuditLevel_AUDIT_LEVEL_FULL} {
		req := &pb.PickRequest{Pool: "pool-0", PrefixHashes: hashes, PromptTokens: 1024, Audit: audit}
		pick := callCPU{name: "Pick " + strings.TrimPrefix(audit.String(), "AUDIT_LEVEL_")}
		call := func() error { _, err := picker.Pick(cctx, req); return err }
		for pick.calls < n {
			if err := block(&res.empty, empty); err != nil {
				return nil, err
			}
			if err := block(&pick, call); err != nil {
				return nil, err
			}
		}
		res.picks = append(res.picks, pick)
	}
	return res, nil
}

// print writes the result as a Markdown table.
func (r *perCallResult) print(w io.Writer, c config) {
	bg := r.background.Seconds() / r.idle.Seconds()
	fmt.Fprintf(w, "prefixload --cpu-per-call: %d instances in %d deployments reporting %g/s each (%.3f cores of daemon CPU with no calls); blocks of %d calls alternate on one connection; the daemon's CPU from /proc/PID/task/*/schedstat\n\n",
		c.streams, c.deps, c.rate, bg, perCallBlock)
	fmt.Fprintln(w, "| call | calls | daemon CPU per call | minus the reports' background | ratio to the empty call | background-corrected ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	net := func(x callCPU) time.Duration {
		return x.perCall() - time.Duration(bg*float64(x.wall)/float64(max(1, x.calls)))
	}
	e, en := r.empty.perCall(), net(r.empty)
	fmt.Fprintf(w, "| %s | %d | %.1f µs | %.1f µs | 1 | 1 |\n", r.empty.name, r.empty.calls, us(e), us(en))
	for _, p := range r.picks {
		fmt.Fprintf(w, "| %s | %d | %.1f µs | %.1f µs | %.2f | %.2f |\n", p.name, p.calls, us(p.perCall()), us(net(p)),
			float64(p.perCall())/float64(e), float64(net(p))/float64(en))
	}
}

func (r *perCallResult) errors() int64 { return 0 } // a failed call ends the run with its error

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// schedCPU is the daemon's CPU time so far, summed over its threads' first
// schedstat field (ns on CPU; finer than /proc/PID/stat's 10 ms ticks).
// The Go runtime does not end its threads, so none is lost between reads.
func (d *daemon) schedCPU() time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", d.cmd.Process.Pid))
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			ns += v
		}
	}
	return time.Duration(ns)
}
