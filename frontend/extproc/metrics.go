package extproc

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics are the processor's counters. Safe for concurrent use.
type metrics struct {
	requests, mismatch, protocol metric.Int64Counter
}

func newMetrics(m metric.Meter) (*metrics, error) {
	var x metrics
	var err error
	if x.requests, err = m.Int64Counter("prefixroute_extproc_requests", metric.WithUnit("{request}"),
		metric.WithDescription("HTTP requests the ext_proc endpoint picker answered, by result: routed, passthrough (no body) or the error reason (x-prefixroute-reason)")); err != nil {
		return nil, err
	}
	if x.mismatch, err = m.Int64Counter("prefixroute_extproc_served_mismatch", metric.WithUnit("{request}"),
		metric.WithDescription("requests the gateway served on another endpoint than the chosen one (envoy.lb x-gateway-destination-endpoint-served: a retry or fallback), by pool")); err != nil {
		return nil, err
	}
	if x.protocol, err = m.Int64Counter("prefixroute_extproc_protocol_errors", metric.WithUnit("{stream}"),
		metric.WithDescription("ext_proc streams ended with InvalidArgument for a message out of order")); err != nil {
		return nil, err
	}
	return &x, nil
}

func (x *metrics) request(ctx context.Context, result string) {
	x.requests.Add(ctx, 1, metric.WithAttributes(attribute.String("result", result)))
}

func (x *metrics) servedMismatch(ctx context.Context, pool string) {
	x.mismatch.Add(ctx, 1, metric.WithAttributes(attribute.String("pool", pool)))
}

func (x *metrics) protocolError(ctx context.Context) { x.protocol.Add(ctx, 1) }
