package agent

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/prefixroute/prefixroute/internal/kvalign"
	"github.com/prefixroute/prefixroute/internal/kvevents"
)

// metrics are the agent's own Prometheus series (prefixagent_*).
type metrics struct {
	reg                                                *prometheus.Registry
	messages, malformed, gaps, unknowns, otherRank     prometheus.Counter
	scrapeErrors, misses                               prometheus.Counter
	eventsByKind                                       *prometheus.CounterVec
	skipped                                            *prometheus.CounterVec
	replays                                            *prometheus.CounterVec
	exact, held, reportLag, waiting, queueMs, kvSilent prometheus.Gauge
}

// newMetrics returns the series of one agent, each with the constant
// labels given (nil: none).
func newMetrics(labels prometheus.Labels) *metrics {
	r := prometheus.NewRegistry()
	c := func(name, help string) prometheus.Counter {
		m := prometheus.NewCounter(prometheus.CounterOpts{Name: "prefixagent_" + name, Help: help, ConstLabels: labels})
		r.MustRegister(m)
		return m
	}
	g := func(name, help string) prometheus.Gauge {
		m := prometheus.NewGauge(prometheus.GaugeOpts{Name: "prefixagent_" + name, Help: help, ConstLabels: labels})
		r.MustRegister(m)
		return m
	}
	v := func(name, help, label string) *prometheus.CounterVec {
		m := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prefixagent_" + name, Help: help, ConstLabels: labels}, []string{label})
		r.MustRegister(m)
		return m
	}
	return &metrics{reg: r,
		messages:     c("kv_messages_total", "KV event messages received from the engine."),
		malformed:    c("kv_malformed_total", "KV event messages or batches that did not decode (skipped; the cache view became unknown)."),
		gaps:         c("kv_gaps_total", "Seq gaps in the engine's KV event stream."),
		unknowns:     c("cache_unknown_total", "Times the cache view became unknown (reporting approximate)."),
		otherRank:    c("kv_other_rank_batches_total", "Batches of another data-parallel rank, dropped."),
		scrapeErrors: c("scrape_errors_total", "Failed scrapes of the engine's /metrics."),
		misses:       c("translation_misses_total", "Events not translated: unknown parent, removal of a block not held, tokens not matching the block count."),
		eventsByKind: v("kv_events_total", "KV events received, by kind.", "kind"),
		skipped:      v("blocks_skipped_total", "Stored or removed blocks not reported, by reason.", "reason"),
		replays:      v("kv_replays_total", "Replay requests, by result (ok, incomplete, failed).", "result"),
		exact:        g("cache_precise", "1 while the agent reports cache events (precise), 0 while it reports load only."),
		held:         g("blocks_held", "Blocks the agent reports held (router hashes)."),
		reportLag:    g("report_lag_seconds", "Age of the load figures in the latest report, in seconds."),
		waiting:      g("engine_waiting_requests", "The engine's waiting requests at the latest scrape."),
		queueMs:      g("engine_queue_ms", "The agent's queue estimate at the latest scrape, in ms."),
		kvSilent:     g("kv_events_silent", "1 while KV events are configured and no message has arrived within --kv-events-silent-after of start (wrong endpoint or port?), else 0."),
	}
}

func (m *metrics) events(k kvevents.Kind) prometheus.Counter {
	return m.eventsByKind.WithLabelValues(k.String())
}

// aligned counts what an Apply added to the aligner's stats.
func (m *metrics) aligned(before, after kvalign.Stats, held int) {
	add := func(c prometheus.Counter, d uint64) {
		if d > 0 {
			c.Add(float64(d))
		}
	}
	add(m.misses, after.Misses-before.Misses)
	add(m.skipped.WithLabelValues("lora"), after.LoRA-before.LoRA)
	add(m.skipped.WithLabelValues("medium"), after.OtherMedium-before.OtherMedium)
	add(m.skipped.WithLabelValues("extra_keys"), after.ExtraKeys-before.ExtraKeys)
	add(m.skipped.WithLabelValues("group"), after.OtherGroup-before.OtherGroup)
	m.held.Set(float64(held))
}

// GroupHandler serves /metrics, /healthz, /livez and /status of the agents
// of one process: the series of all (each agent's own, told apart by
// instance_id when several run: Config.LabelMetrics); /healthz 200 "ok"
// when every agent is healthy (engine scraped, router connected), else 503
// with a JSON error naming each one that is not and why; /livez 200 "ok"
// while every agent runs, whatever the engine and the router do
// (liveness.go); /status the JSON Status of each.
func GroupHandler(agents []*Agent) http.Handler {
	var gs prometheus.Gatherers
	for _, a := range agents {
		gs = append(gs, a.m.reg)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gs, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /livez", livezHandler(agents))
	mux.HandleFunc("GET /status", statusHandler(agents))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		var why []string
		for _, a := range agents {
			if w := a.healthy(); w != "" {
				if len(agents) > 1 {
					w = a.cfg.InstanceID + ": " + w
				}
				why = append(why, w)
			}
		}
		if len(why) > 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			// A failed write means the prober is gone: no one to tell.
			_ = json.NewEncoder(w).Encode(map[string]string{"error": strings.Join(why, "; ")})
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
