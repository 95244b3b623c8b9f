package replica

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/prefixroute/prefixroute/internal/cluster"
)

// RegisterMetrics exports the cluster link's state and counters on m
// (prefixroute_cluster_*), read from cluster.Link.Stats at scrape time.
func (r *Replica) RegisterMetrics(m metric.Meter) error {
	up, err := m.Int64ObservableGauge("prefixroute_cluster_link_up",
		metric.WithDescription("1 while this replica is connected to NATS; 0 while it routes fail-static on its last view."))
	if err != nil {
		return err
	}
	lag, err := m.Float64ObservableGauge("prefixroute_cluster_event_lag", metric.WithUnit("s"),
		metric.WithDescription("Lag of events from other replicas (receive time minus send time, clocks included): the latest batch, and its moving average (kind=last|ewma)."))
	if err != nil {
		return err
	}
	events, err := m.Int64ObservableCounter("prefixroute_cluster_events", metric.WithUnit("{event}"),
		metric.WithDescription("Cluster events by direction: published, received, dropped (outbox full while NATS was slow or down), applied, and receive_dropped (messages the NATS client dropped because this replica applied too slowly)."))
	if err != nil {
		return err
	}
	bytes, err := m.Int64ObservableCounter("prefixroute_cluster_event_bytes", metric.WithUnit("By"),
		metric.WithDescription("Framed cluster event bytes by direction: published, received, dropped."))
	if err != nil {
		return err
	}
	reconnects, err := m.Int64ObservableCounter("prefixroute_cluster_reconnects", metric.WithUnit("{reconnect}"),
		metric.WithDescription("Reconnections of the cluster link to NATS."))
	if err != nil {
		return err
	}
	dir := func(d string) metric.ObserveOption { return metric.WithAttributes(attribute.String("direction", d)) }
	_, err = m.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		l := r.link.Load()
		if l == nil {
			ob.ObserveInt64(up, 0)
			return nil
		}
		st := l.Stats()
		v := int64(0)
		if st.State == cluster.StateConnected {
			v = 1
		}
		ob.ObserveInt64(up, v)
		ob.ObserveFloat64(lag, st.LagLast.Seconds(), metric.WithAttributes(attribute.String("kind", "last")))
		ob.ObserveFloat64(lag, st.LagEWMA.Seconds(), metric.WithAttributes(attribute.String("kind", "ewma")))
		ob.ObserveInt64(events, int64(st.PublishedEvents), dir("published"))
		ob.ObserveInt64(events, int64(st.ReceivedEvents), dir("received"))
		ob.ObserveInt64(events, int64(st.DroppedEvents), dir("dropped"))
		ob.ObserveInt64(events, int64(r.applied.Load()), dir("applied"))
		ob.ObserveInt64(events, int64(st.ReceiveDropped), dir("receive_dropped"))
		ob.ObserveInt64(bytes, int64(st.PublishedBytes), dir("published"))
		ob.ObserveInt64(bytes, int64(st.ReceivedBytes), dir("received"))
		ob.ObserveInt64(bytes, int64(st.DroppedBytes), dir("dropped"))
		ob.ObserveInt64(reconnects, int64(st.Reconnects))
		return nil
	}, up, lag, events, bytes, reconnects)
	return err
}
