package flowq

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// waitBuckets are the bucket boundaries of prefixroute_flow_wait: 1 ms to
// 10 min.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 600}

// observer records the flow-control metrics. Pools come from the router's
// registry (a pick reaches Hold only for a pool it knows); the band label
// is on the waiting gauge only, which reports the bands present, so client
// priorities cannot grow the series without bound beyond the picks
// waiting. Safe for concurrent use; a nil *observer records nothing.
type observer struct {
	wait   metric.Float64Histogram
	leaves metric.Int64Counter
	mu     sync.Mutex
	attrs  map[[2]string]metric.MeasurementOption // at most maxCachedAttrs
}

// maxCachedAttrs bounds the attribute options the observer keeps: six
// results of MaxDroppedPools pools. Past it an option is built for each
// use and not kept (pools come and go over a daemon's life).
const maxCachedAttrs = 6 * MaxDroppedPools

// RegisterMetrics registers prefixroute_flow_waiting (gauge: picks waiting
// per pool and band), prefixroute_flow_wait (histogram: seconds a
// dispatched pick waited, per pool) and prefixroute_flow_leaves (counter:
// picks that left the queue, per pool and result: dispatched,
// queue_timeout, queue_full, sheddable_rejected, canceled). Call it before
// the first Hold.
func (r *Rooms) RegisterMetrics(m metric.Meter) error {
	h, err := m.Float64Histogram("prefixroute_flow_wait", metric.WithUnit("s"),
		metric.WithDescription("Time a pick waited in the router's queue (on_saturation: queue) before it got an instance, by pool."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	if err != nil {
		return err
	}
	c, err := m.Int64Counter("prefixroute_flow_leaves", metric.WithUnit("{pick}"),
		metric.WithDescription("Picks of a saturated pool under on_saturation: queue, by pool and result: dispatched, queue_timeout, queue_full, sheddable_rejected, canceled."))
	if err != nil {
		return err
	}
	g, err := m.Int64ObservableGauge("prefixroute_flow_waiting", metric.WithUnit("{pick}"),
		metric.WithDescription("Picks waiting in the router's queue (on_saturation: queue), by pool and priority band."))
	if err != nil {
		return err
	}
	r.obs = &observer{wait: h, leaves: c, attrs: make(map[[2]string]metric.MeasurementOption)}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, pq := range r.Snapshot(nil) {
			for _, b := range pq.Bands {
				o.ObserveInt64(g, int64(b.Waiting), metric.WithAttributes(attribute.String("pool", pq.Pool),
					attribute.String("band", strconv.Itoa(int(b.Priority)))))
			}
		}
		return nil
	}, g)
	return err
}

// attr returns the {pool, key} attribute option, cached.
func (o *observer) attr(pool, key, value string) metric.MeasurementOption {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := [2]string{pool, value}
	a := o.attrs[k]
	if a == nil {
		if key == "" {
			a = metric.WithAttributeSet(attribute.NewSet(attribute.String("pool", pool)))
		} else {
			a = metric.WithAttributeSet(attribute.NewSet(attribute.String("pool", pool), attribute.String(key, value)))
		}
		if len(o.attrs) < maxCachedAttrs {
			o.attrs[k] = a
		}
	}
	return a
}

func (o *observer) dispatched(pool string, waited time.Duration) {
	if o == nil {
		return
	}
	ctx := context.Background()
	o.wait.Record(ctx, waited.Seconds(), o.attr(pool, "", ""))
	o.leaves.Add(ctx, 1, o.attr(pool, "result", "dispatched"))
}

func (o *observer) rejected(pool string, err error) {
	if o == nil {
		return
	}
	reason := Reason(err)
	if reason == "" {
		reason = "other"
	}
	o.leaves.Add(context.Background(), 1, o.attr(pool, "result", reason))
}
