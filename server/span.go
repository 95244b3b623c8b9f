package server

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of the Pick span (the server span otelgrpc opens for
// /prefixroute.v1.PickService/Pick).
const (
	attrPool                  = attribute.Key("prefixroute.pool")
	attrDeployment            = attribute.Key("prefixroute.deployment")
	attrInstance              = attribute.Key("prefixroute.instance")
	attrStrategy              = attribute.Key("prefixroute.strategy")
	attrProbability           = attribute.Key("prefixroute.probability")
	attrDeploymentProbability = attribute.Key("prefixroute.deployment_probability")
	attrInstanceProbability   = attribute.Key("prefixroute.instance_probability")
	attrHitRatio              = attribute.Key("prefixroute.hit_ratio")
	attrBlocks                = attribute.Key("prefixroute.blocks")
	attrMatchedBlocks         = attribute.Key("prefixroute.matched_blocks")
	attrWeightsVersion        = attribute.Key("prefixroute.weights_version")
	attrSeed                  = attribute.Key("prefixroute.seed")
)

// setSpan puts a pick's decision on the call's span: pool, blocks, strategy,
// weights version and seed (so that a traced pick can be replayed, whatever
// audit level the client asked for) and, when the pick succeeded, the
// chosen deployment and instance with the joint probability P(d)·P(i|d) of
// the choice and its two factors. Nothing when the scheduler did not run. It
// does nothing when the span is not recording (tracing off or not sampled),
// so it costs nothing then. Safe for concurrent use.
func setSpan(ctx context.Context, rec *pickRecord) {
	pk := rec.pk
	if pk == nil {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrPool.String(rec.pool), attrBlocks.Int(rec.blocks()),
		attrSeed.String(strconv.FormatUint(rec.seed, 10)))
	if pk.Config != nil {
		span.SetAttributes(attrStrategy.String(pk.Config.Policy.Strategy.String()),
			attrWeightsVersion.Int64(int64(pk.Config.WeightsVersion)))
	}
	if rec.decErr != nil {
		return
	}
	d, snap := &pk.Decision, &pk.Snapshot
	in := &snap.Instances[d.Instance]
	span.SetAttributes(
		attrDeployment.String(snap.Deployments[d.Deployment].Name),
		attrInstance.String(in.ID),
		attrProbability.Float64(d.Instances[d.Instance].Joint),
		attrDeploymentProbability.Float64(d.Deployments[d.Deployment].Probability),
		attrInstanceProbability.Float64(d.Instances[d.Instance].Probability),
		attrHitRatio.Float64(d.Deployments[d.Deployment].HitRatio),
		attrMatchedBlocks.Int(in.MatchedBlocks),
	)
}
