package server

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// The prefix index's memory estimate per entry, from the figures in
// internal/state/doc.go: a distinct block costs about 80 bytes in the pool's
// map; a (block, instance) pair about 40 bytes in the instance's LRU plus 4
// bytes in the block's holder set. (Holder bitsets of blocks held by many
// instances are not counted separately: they are at most the 4 bytes per
// holder they replace.)
const (
	indexBytesPerBlock = 80
	indexBytesPerPair  = 44
)

// gauges are the state-derived instruments, read by one callback per scrape
// so that the hot path does not maintain them.
type gauges struct {
	instances, streams, weightsVersion, policyVersion       metric.Int64ObservableGauge
	indexBlocks, indexPairs, indexBytes, eligible, winPicks metric.Int64ObservableGauge
	reportAge, weight, weightShare, trafficShare, hitRatio  metric.Float64ObservableGauge
	capEvicted, reports, picks, blocks, matched             metric.Int64ObservableCounter
	excluded, flaps, takeovers, pd, retries                 metric.Int64ObservableCounter
}

// registerGauges creates the observable gauges on m and registers their
// callback.
func (o *observer) registerGauges(m metric.Meter) error {
	var g gauges
	var errs []error
	i64 := func(name, unit, desc string) metric.Int64ObservableGauge {
		x, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return x
	}
	f64 := func(name, unit, desc string) metric.Float64ObservableGauge {
		x, err := m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return x
	}
	g.instances = i64("prefixroute_instances", "{instance}", "Known instances by pool, deployment and state (ok, stale, draining, disconnected).")
	g.streams = i64("prefixroute_report_streams", "{stream}", "Open ReportLoad streams (connected instances) by pool and deployment.")
	g.weightsVersion = i64("prefixroute_weights_version", "", "Version of the pool's weights in force (0: never set).")
	g.policyVersion = i64("prefixroute_policy_version", "", "Version of the pool's policy in force (0: never set).")
	g.indexBlocks = i64("prefixroute_prefix_index_blocks", "{block}", "Distinct block hashes in the pool's prefix index.")
	g.indexPairs = i64("prefixroute_prefix_index_entries", "{entry}", "(block, instance) entries in the pool's prefix index.")
	g.indexBytes = i64("prefixroute_prefix_index_bytes", "By", "Estimated memory of the pool's prefix index: 80 B per block + 44 B per entry.")
	g.eligible = i64("prefixroute_pick_eligible_instances", "{instance}", "Instances of each deployment that passed the eligibility checks in the pool's latest decision.")
	g.winPicks = i64("prefixroute_deployment_window_picks", "{pick}", "Successful picks routed to each deployment over the traffic-share window (60 s).")
	g.reportAge = f64("prefixroute_instance_report_age", "s", "Time since each instance's latest load report.")
	g.weight = f64("prefixroute_deployment_weight", "", "Each deployment's weight in force (1 for every deployment while no weights are set).")
	g.weightShare = f64("prefixroute_deployment_weight_share_ratio", "", "Each deployment's weight over the pool's sum of weights: the traffic share the operator configured.")
	g.trafficShare = f64("prefixroute_deployment_traffic_share_ratio", "", "Each deployment's share of the pool's successful picks over the traffic-share window (60 s); absent while the pool had none.")
	g.hitRatio = f64("prefixroute_deployment_hit_ratio", "", "Matched over requested prefix blocks of the picks routed to each deployment over the traffic-share window (60 s); absent while they carried no blocks.")
	c64 := func(name, unit, desc string) metric.Int64ObservableCounter {
		x, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return x
	}
	g.capEvicted = c64("prefixroute_prefix_index_cap_evicted", "{entry}",
		"(block, instance) entries evicted because the router held --max-index-pairs entries over all pools.")
	// Counted by the hot paths in atomics (observer), read here.
	g.reports = c64("prefixroute_reports", "{report}", "Load reports received and applied, by pool and deployment.")
	g.picks = c64("prefixroute_picks", "{pick}", "Pick calls by pool, chosen deployment (unset when the pick failed) and outcome.")
	g.blocks = c64("prefixroute_pick_prefix_blocks", "{block}", "Prefix blocks of the successful picks routed to each deployment.")
	g.matched = c64("prefixroute_pick_matched_blocks", "{block}",
		"Prefix blocks already cached on the chosen instance, over the successful picks routed to each deployment; divide by prefixroute_pick_prefix_blocks_total for the hit ratio.")
	g.excluded = c64("prefixroute_pick_excluded_instances", "{instance}",
		"Instances left out of Pick decisions, by reason (eligibility checks and the threshold/argmin strategies): one per instance per decision.")
	g.pd = c64("prefixroute_pick_pd_decisions", "{pick}",
		"Picks drawn into a deployment with prefill instances, by pool and the prefill stage's reason: disaggregated, below_threshold, local_cheaper, no_prefill_instance, prefill_saturated (the last two failed under pd_fallback fail).")
	g.flaps = c64("prefixroute_instance_identity_flaps", "{takeover}",
		"ReportLoad streams that replaced a stream still open for the same instance id, by pool and deployment: a reconnect counts once; steady growth means two instances share one id.")
	g.takeovers = c64("prefixroute_instance_takeovers", "{takeover}",
		"Report streams that took over an existing instance id, by pool and outcome: replaced (a stream still open in the same deployment), moved (the instance came back in another deployment), refused (the caller's binding does not cover the deployment where the instance lives; PermissionDenied).")
	g.retries = c64("prefixroute_pick_retries", "{pick}",
		"Picks decided again because a concurrent pick was accounted onto the chosen instance between their snapshot and their accounting (each then prices the other's work), by pool.")
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		o.observe(ob, &g)
		return nil
	}, g.instances, g.streams, g.weightsVersion, g.policyVersion, g.indexBlocks, g.indexPairs, g.indexBytes,
		g.eligible, g.winPicks, g.reportAge, g.weight, g.weightShare, g.trafficShare, g.hitRatio, g.capEvicted, g.reports, g.picks, g.blocks, g.matched,
		g.excluded, g.flaps, g.takeovers, g.pd, g.retries)
	return err
}

// states are the instance states, in the order of their series.
var states = [...]state.InstanceState{state.StateOK, state.StateStale, state.StateDraining, state.StateUnreachable, state.StateDisconnected}

// observe reads every pool once. It runs at scrape time; its allocations
// are per scrape, not per pick.
func (o *observer) observe(ob metric.Observer, g *gauges) {
	o.observeCounts(ob, g)
	now := o.now()
	_, evicted := o.reg.IndexPairs()
	ob.ObserveInt64(g.capEvicted, evicted)
	for _, pool := range o.reg.Pools() {
		pa := attribute.String("pool", pool.Name())
		popt := metric.WithAttributes(pa)
		cfg := pool.Config()
		ob.ObserveInt64(g.weightsVersion, int64(cfg.WeightsVersion), popt)
		ob.ObserveInt64(g.policyVersion, int64(cfg.PolicyVersion), popt)
		blocks, pairs := pool.IndexStats()
		ob.ObserveInt64(g.indexBlocks, int64(blocks), popt)
		ob.ObserveInt64(g.indexPairs, int64(pairs), popt)
		ob.ObserveInt64(g.indexBytes, int64(blocks*indexBytesPerBlock+pairs*indexBytesPerPair), popt)
		ob.ObserveInt64(g.retries, int64(pool.Retries()), popt)

		type key struct {
			dep string
			st  state.InstanceState
		}
		count := make(map[key]int64)
		for _, in := range pool.Instances(now) {
			count[key{in.Deployment, in.State}]++
			ob.ObserveFloat64(g.reportAge, in.ReportAge.Seconds(), metric.WithAttributes(pa,
				attribute.String("deployment", in.Deployment), attribute.String("instance", in.Instance)))
		}

		po := o.lookup(pool.Name())
		sec := now.Unix()
		type sums struct{ picks, blocks, matched uint64 }
		win := make(map[string]sums)
		var total uint64
		if po != nil {
			po.mu.RLock()
			for name, d := range po.deps {
				var s sums
				s.picks, s.blocks, s.matched = d.ring.sum(sec)
				win[name] = s
				total += s.picks
			}
			po.mu.RUnlock()
		}
		for _, d := range pool.Deployments() {
			da := attribute.String("deployment", d.Deployment)
			dopt := metric.WithAttributes(pa, da)
			var connected int64
			for _, st := range states {
				n := count[key{d.Deployment, st}]
				ob.ObserveInt64(g.instances, n, metric.WithAttributes(pa, da, attribute.String("state", st.String())))
				if st != state.StateDisconnected {
					connected += n
				}
			}
			ob.ObserveInt64(g.streams, connected, dopt)
			ob.ObserveFloat64(g.weight, d.Weight, dopt)
			ob.ObserveFloat64(g.weightShare, d.Share, dopt)
			s := win[d.Deployment]
			ob.ObserveInt64(g.winPicks, int64(s.picks), dopt)
			if total > 0 {
				ob.ObserveFloat64(g.trafficShare, float64(s.picks)/float64(total), dopt)
			}
			if s.blocks > 0 {
				ob.ObserveFloat64(g.hitRatio, float64(s.matched)/float64(s.blocks), dopt)
			}
			if po != nil {
				if n := po.dep(d.Deployment).eligible.Load(); n >= 0 {
					ob.ObserveInt64(g.eligible, n, dopt)
				}
			}
		}
	}
}

// observeCounts reads the counters the hot paths keep in atomics, for every
// pool the observer has seen (the "" pool too: picks naming an unknown
// pool). A series appears once its count is above zero, as a counter's
// does after its first Add, and disappears with its pool (dropPool), so a
// pool the registry forgot leaves no series behind.
func (o *observer) observeCounts(ob metric.Observer, g *gauges) {
	o.mu.RLock()
	pools := make([]*poolObs, 0, len(o.pools))
	for _, p := range o.pools {
		pools = append(pools, p)
	}
	o.mu.RUnlock()
	for _, p := range pools {
		pa := attribute.String("pool", p.name)
		for oc := range numOutcomes {
			if n := p.failed[oc].Load(); n > 0 {
				ob.ObserveInt64(g.picks, n, metric.WithAttributes(pa, attribute.String("outcome", outcomeNames[oc])))
			}
		}
		for r := range scheduler.NumReasons {
			if n := p.excluded[r].Load(); n > 0 {
				ob.ObserveInt64(g.excluded, n, metric.WithAttributes(pa, attribute.String("reason", r.String())))
			}
		}
		for r := scheduler.PDReason(1); r < scheduler.NumPDReasons; r++ {
			if n := p.pd[r].Load(); n > 0 {
				ob.ObserveInt64(g.pd, n, metric.WithAttributes(pa, attribute.String("reason", r.String())))
			}
		}
		for oc := range numTakeoverOutcomes {
			if n := p.takeovers[oc].Load(); n > 0 {
				ob.ObserveInt64(g.takeovers, n, metric.WithAttributes(pa, attribute.String("outcome", takeoverNames[oc])))
			}
		}
		p.mu.RLock()
		for name, d := range p.deps {
			da := attribute.String("deployment", name)
			if n := d.picks.Load(); n > 0 {
				ob.ObserveInt64(g.picks, n, metric.WithAttributes(pa, da, attribute.String("outcome", "ok")))
			}
			if n := d.blocks.Load(); n > 0 {
				ob.ObserveInt64(g.blocks, n, metric.WithAttributes(pa, da))
				ob.ObserveInt64(g.matched, d.matched.Load(), metric.WithAttributes(pa, da))
			}
			if n := d.reports.Load(); n > 0 {
				ob.ObserveInt64(g.reports, n, metric.WithAttributes(pa, da))
			}
			if n := d.flaps.Load(); n > 0 {
				ob.ObserveInt64(g.flaps, n, metric.WithAttributes(pa, da))
			}
		}
		p.mu.RUnlock()
	}
}
