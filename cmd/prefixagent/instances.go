package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/prefixroute/prefixroute/internal/agent"
)

// instanceFlags is the repeated --instance flag: one engine of the host
// each, as key=value pairs overriding the shared flags.
type instanceFlags []string

func (f *instanceFlags) String() string { return strings.Join(*f, " ") }
func (f *instanceFlags) Set(v string) error {
	*f = append(*f, v)
	return nil
}

// instanceUsage is the help text of --instance.
const instanceUsage = "one engine of this host, repeatable: id=ID,address=HOST:PORT[,metrics-url=URL][,kv-events=EP]" +
	"[,kv-events-replay=EP][,deployment=D][,data-parallel-rank=N]; the other flags are shared. " +
	"With --instance the engines' reports share one ReportLoadBatch stream (one message a tick)"

// configs returns one agent config per --instance: base with the
// instance's keys applied.
func (f instanceFlags) configs(base agent.Config) ([]agent.Config, error) {
	var out []agent.Config
	seen := map[string]bool{}
	for _, spec := range f {
		c := base
		c.InstanceID, c.Address, c.LabelMetrics = "", "", true
		for kv := range strings.SplitSeq(spec, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || v == "" {
				return nil, fmt.Errorf("--instance %q: %q is not key=value", spec, kv)
			}
			switch k {
			case "id":
				c.InstanceID = v
			case "address":
				c.Address = v
			case "metrics-url":
				c.MetricsURL = v
			case "kv-events":
				c.KVEvents = v
			case "kv-events-replay":
				c.KVEventsReplay = v
			case "deployment":
				c.Deployment = v
			case "data-parallel-rank":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("--instance %q: data-parallel-rank %q is not a rank (0, 1, ...)", spec, v)
				}
				c.DPRank = n
			default:
				return nil, fmt.Errorf("--instance %q: unknown key %q; want id, address, metrics-url, kv-events, kv-events-replay, deployment or data-parallel-rank", spec, k)
			}
		}
		if c.InstanceID == "" || c.Address == "" {
			return nil, fmt.Errorf("--instance %q: id and address are required", spec)
		}
		if seen[c.InstanceID] {
			return nil, fmt.Errorf("--instance %q: instance id %q given twice", spec, c.InstanceID)
		}
		seen[c.InstanceID] = true
		out = append(out, c)
	}
	return out, nil
}

// runAll runs the agents until ctx ends or one fails; the first failure
// stops the others and is returned.
func runAll(ctx context.Context, agents []*agent.Agent) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() {
			if err := a.Run(ctx); err != nil {
				cancel(err)
			}
		})
	}
	<-ctx.Done()
	wg.Wait()
	return context.Cause(ctx)
}
