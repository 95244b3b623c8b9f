package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// renderPick prints the chosen instance and, with explain, the audit of the
// decision: the request and policy, the deployment level (weight, share,
// hit ratio, P(d)) and the instance level (cost parts, P(i|d), joint P).
func renderPick(w io.Writer, r *pb.PickResponse, explain bool) {
	line := func(format string, args ...any) {
		fmt.Fprintln(w, wrap(fmt.Sprintf(format, args...), termWidth, "  "))
	}
	line("picked %s (deployment %s) at %s", r.GetInstanceId(), r.GetDeployment(), r.GetAddress())
	if !explain {
		return
	}
	d := r.GetDecision()
	if d == nil {
		line("(the sidecar returned no audit)")
		return
	}
	p := d.GetPolicy()
	line("request: %d blocks, %s; weights version %d; seed %d",
		d.GetBlocks(), fmtTokens(d.GetPromptTokens()), d.GetWeightsVersion(), d.GetSeed())
	line("policy: %s", policyLine(d))
	line("draws: deployment %s, instance %s", fmtDraw(d.GetDeploymentDraw()), fmtDraw(d.GetInstanceDraw()))
	fmt.Fprintln(w)

	loadTerm := p.GetDeploymentDeltaMs() > 0
	cols := []column{nameCol("DEPLOYMENT", 8), numCol("WEIGHT"), numCol("SHARE"), numCol("HIT"), numCol("MATCHED"),
		numCol("ELIG")}
	if loadTerm {
		cols = append(cols, numCol("LOAD"))
	}
	cols = append(cols, numCol("P(d)"), nameCol("NOTE", 12))
	dt := newTable(cols...)
	sum := 0.0
	for _, dep := range d.GetDeployments() {
		sum += dep.GetWeight()
	}
	for _, dep := range d.GetDeployments() {
		share := 0.0
		if sum > 0 {
			share = dep.GetWeight() / sum
		}
		row := []string{dep.GetDeployment(), fmtWeight(dep.GetWeight()), fmtPct(share), fmtPct(dep.GetHitRatio()),
			fmtBlocks(dep.GetMatchedBlocks()), fmt.Sprint(dep.GetEligibleInstances())}
		if loadTerm {
			row = append(row, fmtMs(dep.GetLoadMs()))
		}
		row = append(row, fmtPct(dep.GetProbability()), note(dep.GetExcludedReason(), dep.GetDeployment() == r.GetDeployment()))
		dt.add(row...)
	}
	dt.write(w)
	fmt.Fprintln(w)

	// Instances by deployment (the audit's order), under a line with the
	// deployment's P(d), so that P = P(d) x P(i|d) reads off the table.
	pd := make(map[string]float64, len(d.GetDeployments()))
	for _, dep := range d.GetDeployments() {
		pd[dep.GetDeployment()] = dep.GetProbability()
	}
	it := newTable(nameCol("INSTANCE", 10), numCol("MATCHED"), numCol("PREFILL"), numCol("QUEUE"),
		numCol("COST"), numCol("P(i|d)"), numCol("P"), nameCol("NOTE", 12))
	weight := 0.0 // the backlog weight of PREFILL in COST, the same for every instance
	if len(d.GetInstances()) > 0 {
		weight = d.GetInstances()[0].GetPrefillWeight()
	}
	dep := ""
	for i, in := range d.GetInstances() {
		if i == 0 || in.GetDeployment() != dep {
			dep = in.GetDeployment()
			it.section(fmt.Sprintf("deployment %s, P(d) %s", dep, fmtPct(pd[dep])))
		}
		mark := "  "
		if in.GetInstanceId() == r.GetInstanceId() && dep == r.GetDeployment() {
			mark = "* "
		}
		note := in.GetExcludedReason()
		if note == "" && in.GetShortLane() {
			note = "lane"
		}
		it.add(mark+in.GetInstanceId(), fmtBlocks(in.GetMatchedBlocks()), fmtMs(in.GetPrefillMs()),
			fmtMs(in.GetQueueMs()), fmtMs(in.GetCostMs()), fmtPct(in.GetProbability()), fmtPct(in.GetJointProbability()),
			note)
	}
	it.write(w)
	line("* chosen; COST = %s x PREFILL + QUEUE + batch wait (%s); predicted TTFT = PREFILL + QUEUE + batch wait; "+
		"P = P(d) x P(i|d)", fmtWeightFactor(weight), fmtMs(p.GetBatchWaitMs()))
	if p.GetShortLanes() > 0 {
		line("short lane (lane, short_lane): %d instance(s) per deployment that take prefills up to %s", p.GetShortLanes(),
			fmtMs(p.GetShortLaneMaxPrefillMs()))
	}
	if t := d.GetTtftSloMs(); t > 0 {
		met := "missed"
		if d.GetSloMet() {
			met = "met"
		}
		line("TTFT target %s: %s by prediction (on_slo_miss %s)", fmtMs(t), met, strings.ToLower(strings.TrimPrefix(p.GetOnSloMiss().String(), "SLO_ON_MISS_")))
	}
	if h := d.GetDispatchHoldMs(); h > 0 {
		line("answer held %s (dispatch_spacing_ms %s), so the request reaches its instance after the one picked for it before",
			fmtMs(h), fmtMs(p.GetDispatchSpacingMs()))
	}
}

// fmtWeightFactor is the footer's prefill weight w (the backlog weight,
// prefill_weight of the audit), exact to 4 significant digits; "w" from a
// sidecar whose audit has none (0).
func fmtWeightFactor(w float64) string {
	if w == 0 {
		return "w (not in this sidecar's audit)"
	}
	return strconv.FormatFloat(w, 'g', 4, 64)
}

// policyLine summarises the parameters the decision used.
func policyLine(d *pb.Decision) string {
	p := d.GetPolicy()
	var parts []string
	switch d.GetStrategy() {
	case pb.Strategy_STRATEGY_THRESHOLD:
		parts = append(parts, fmt.Sprintf("threshold, band max(%s of min cost, %s)",
			fmtPct(p.GetThresholdRatio()), fmtMs(p.GetThresholdMinMs())))
	case pb.Strategy_STRATEGY_ARGMIN:
		parts = append(parts, "argmin")
	default:
		parts = append(parts, "softmax, delta "+fmtMs(p.GetDeltaMs()))
	}
	parts = append(parts, "lambda_h "+fmtNum(p.GetLambdaH()))
	if p.GetDeploymentDeltaMs() > 0 {
		parts = append(parts, "deployment delta "+fmtMs(p.GetDeploymentDeltaMs()))
	}
	return strings.Join(parts, ", ")
}

// fmtDraw formats a draw in [0, 1) with 4 decimals, rounded down so that
// it never shows 1.
func fmtDraw(v float64) string { return fmt.Sprintf("%.4f", math.Floor(v*1e4)/1e4) }

// note is the NOTE cell: the exclusion reason, or "drawn" for the drawn
// deployment.
func note(reason string, drawn bool) string {
	switch {
	case reason != "":
		return reason
	case drawn:
		return "drawn"
	}
	return ""
}
