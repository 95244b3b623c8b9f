// Package enginemetrics reads a vLLM or SGLang /metrics page and turns it
// into the load figures of a ReportLoad.
//
// # Metrics read (names and labels from the engines' sources)
//
// vLLM (vllm/v1/metrics/loggers.py): vllm:num_requests_waiting,
// vllm:num_requests_running, vllm:kv_cache_usage_perc (before v0.10:
// vllm:gpu_cache_usage_perc), vllm:cache_config_info{block_size,
// num_gpu_blocks} (value 1), vllm:prompt_tokens_total and the
// vllm:request_prompt_tokens histogram (its _count is the requests
// counted). SGLang (python/sglang/srt/metrics/collector.py):
// sglang:num_queue_reqs, sglang:num_running_reqs, sglang:token_usage,
// sglang:cache_config_info{page_size,num_pages}, sglang:prompt_tokens_total
// and sglang:num_requests_total. Every engine label (model_name, engine,
// tp_rank...) is summed over, except that cache_config_info is read from
// its first series.
//
// # The queue estimate
//
// Estimator turns consecutive Samples into a Load:
//
//	prompt_tokens  = Δprompt_tokens_total / Δrequests_total   (mean prompt length, tokens;
//	                 lifetime ratio until two samples differ, 0 before any request)
//	waiting_tokens = waiting_requests × prompt_tokens
//	throughput     = Δprompt_tokens_total / Δt over a window of at least
//	                 ThroughputWindow (1s) during which requests were waiting at
//	                 both ends (the engine was saturated, so the prompt tokens it
//	                 processed measure its prefill capacity, not its demand);
//	                 an exponential moving average, weight 1/4 per window
//	queue_ms       = 1000 × waiting_tokens / throughput       (sent only once a
//	                 throughput was measured; before that the router divides
//	                 queued_prefill_tokens by the pool's default throughput)
//
// The running requests' remaining prefill is not in the estimate: the
// engines export no per-request progress.
//
// A Sample's parser is safe for concurrent use; an Estimator is not.
package enginemetrics

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Engine is the model server kind.
type Engine int

// The engines.
const (
	VLLM Engine = iota + 1
	SGLang
)

// ParseEngine parses "vllm" or "sglang".
func ParseEngine(s string) (Engine, error) {
	switch s {
	case "vllm":
		return VLLM, nil
	case "sglang":
		return SGLang, nil
	}
	return 0, fmt.Errorf("unknown engine %q; want vllm or sglang", s)
}

// String returns the engine's name.
func (e Engine) String() string {
	switch e {
	case VLLM:
		return "vllm"
	case SGLang:
		return "sglang"
	}
	return "unknown"
}

// names are one engine's metric and label names.
type names struct {
	waiting, running, usage, usageOld, cacheInfo, blockLabel, blocksLabel, promptTokens, requests string
}

var engineNames = map[Engine]names{
	VLLM: {"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
		"vllm:cache_config_info", "block_size", "num_gpu_blocks", "vllm:prompt_tokens_total", "vllm:request_prompt_tokens"},
	SGLang: {"sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage", "",
		"sglang:cache_config_info", "page_size", "num_pages", "sglang:prompt_tokens_total", "sglang:num_requests_total"},
}

// MaxPageBytes is the largest /metrics page Parse reads: 8 MiB.
const MaxPageBytes = 8 << 20

// ErrNoMetrics is wrapped when the page lacks the engine's queue gauges
// (wrong engine, or SGLang without --enable-metrics).
var ErrNoMetrics = errors.New("the engine's metrics are missing")

// Sample is one scrape's figures.
type Sample struct {
	Waiting, Running float64
	// KVUsage is the used KV-cache fraction, 0..1.
	KVUsage float64
	// BlockSize (tokens) and CapacityBlocks come from cache_config_info; 0
	// when absent.
	BlockSize, CapacityBlocks uint64
	// PromptTokens and Requests are the engine's lifetime counters; valid
	// when HasCounters.
	PromptTokens, Requests float64
	HasCounters            bool
	// Role is the engine's prefill/decode role when its page says:
	// SGLang's engine_type label on its queue gauges ("prefill", "decode"
	// or "unified", from --disaggregation-mode); "" when the page does not
	// say (vLLM exposes no kv_transfer_config.kv_role on /metrics).
	Role string
}

// Parse reads one /metrics page (Prometheus text format, which vLLM and
// SGLang serve) of engine e.
func Parse(e Engine, r io.Reader) (Sample, error) {
	n, ok := engineNames[e]
	if !ok {
		return Sample{}, fmt.Errorf("unknown engine %d", e)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	lr := &io.LimitedReader{R: r, N: MaxPageBytes + 1}
	fams, err := p.TextToMetricFamilies(lr)
	if lr.N <= 0 {
		return Sample{}, fmt.Errorf("metrics page over %d bytes", MaxPageBytes)
	}
	if err != nil {
		return Sample{}, fmt.Errorf("metrics page: %w", err)
	}
	var s Sample
	var okW, okR bool
	s.Waiting, okW = sum(fams[n.waiting])
	s.Running, okR = sum(fams[n.running])
	if !okW || !okR {
		return Sample{}, fmt.Errorf("%w: no %s and %s on the page", ErrNoMetrics, n.waiting, n.running)
	}
	u, ok := mean(fams[n.usage])
	if !ok && n.usageOld != "" {
		u, _ = mean(fams[n.usageOld])
	}
	s.KVUsage = min(max(u, 0), 1)
	s.Role = engineType(fams[n.running])
	if f := fams[n.cacheInfo]; f != nil && len(f.Metric) > 0 {
		for _, lp := range f.Metric[0].Label {
			v, err := strconv.ParseUint(lp.GetValue(), 10, 64)
			switch {
			case err != nil:
			case lp.GetName() == n.blockLabel:
				s.BlockSize = v
			case lp.GetName() == n.blocksLabel:
				s.CapacityBlocks = v
			}
		}
	}
	pt, okP := sum(fams[n.promptTokens])
	rq, okQ := sum(fams[n.requests])
	if okP && okQ {
		s.PromptTokens, s.Requests, s.HasCounters = pt, rq, true
	}
	return s, nil
}

// value is a series' value: gauge, counter, untyped, or a histogram's
// sample count.
func value(m *dto.Metric) (float64, bool) {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	}
	return 0, false
}

// sum adds a family's series; false when it has none.
func sum(f *dto.MetricFamily) (float64, bool) {
	if f == nil {
		return 0, false
	}
	t, any := 0.0, false
	for _, m := range f.Metric {
		if v, ok := value(m); ok {
			t, any = t+v, true
		}
	}
	return t, any
}

// mean averages a family's series (usage fractions of several ranks).
func mean(f *dto.MetricFamily) (float64, bool) {
	t, ok := sum(f)
	if !ok || len(f.Metric) == 0 {
		return 0, false
	}
	return t / float64(len(f.Metric)), true
}

// engineType is the engine_type label of a family's first series (SGLang:
// prefill, decode or unified), "" when it has none.
func engineType(f *dto.MetricFamily) string {
	if f == nil || len(f.Metric) == 0 {
		return ""
	}
	for _, lp := range f.Metric[0].Label {
		if lp.GetName() == "engine_type" {
			return lp.GetValue()
		}
	}
	return ""
}
