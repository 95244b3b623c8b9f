package enginemetrics

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestParseFixtures reads the recorded pages of both engines.
func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		e    Engine
		want Sample
	}{
		{"testdata/vllm.metrics", VLLM, Sample{Waiting: 3, Running: 7, KVUsage: 0.4215, BlockSize: 16, CapacityBlocks: 27000,
			PromptTokens: 1.2e6, Requests: 1000, HasCounters: true}},
		{"testdata/sglang.metrics", SGLang, Sample{Waiting: 5, Running: 12, KVUsage: 0.62, BlockSize: 16, CapacityBlocks: 8192,
			PromptTokens: 500000, Requests: 1000, HasCounters: true, Role: "unified"}},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(tc.e, bytes.NewReader(b))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.file, got, err, tc.want)
		}
	}
}

// TestParseRole: SGLang's engine_type label is the engine's role; a page
// without it (vLLM's) says nothing.
func TestParseRole(t *testing.T) {
	for _, tc := range []struct{ page, want string }{
		{"sglang:num_running_reqs{engine_type=\"prefill\",tp_rank=\"0\"} 1\nsglang:num_queue_reqs{engine_type=\"prefill\"} 0\n", "prefill"},
		{"sglang:num_running_reqs{engine_type=\"decode\"} 1\nsglang:num_queue_reqs{engine_type=\"decode\"} 0\n", "decode"},
		{"sglang:num_running_reqs 1\nsglang:num_queue_reqs 0\n", ""},
	} {
		got, err := Parse(SGLang, strings.NewReader(tc.page))
		if err != nil || got.Role != tc.want {
			t.Errorf("%q: role %q, %v; want %q", tc.page, got.Role, err, tc.want)
		}
	}
}

// TestParseErrors: each bad page gets an error saying what is wrong.
func TestParseErrors(t *testing.T) {
	vllmPage, _ := os.ReadFile("testdata/vllm.metrics")
	for _, tc := range []struct {
		name string
		e    Engine
		page string
		want string
	}{
		{"wrong engine", SGLang, string(vllmPage), "no sglang:num_queue_reqs and sglang:num_running_reqs"},
		{"garbage", VLLM, "vllm:num_requests_waiting{ 3\n", "metrics page:"},
		{"empty", VLLM, "", "no vllm:num_requests_waiting"},
		{"too big", VLLM, strings.Repeat("#", MaxPageBytes+1), "over 8388608 bytes"},
	} {
		_, err := Parse(tc.e, strings.NewReader(tc.page))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
		if tc.name == "wrong engine" && !errors.Is(err, ErrNoMetrics) {
			t.Errorf("wrong engine: %v is not ErrNoMetrics", err)
		}
	}
}

// TestParseOldUsageName: vLLM before v0.10 named the usage gauge
// gpu_cache_usage_perc.
func TestParseOldUsageName(t *testing.T) {
	page := "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:gpu_cache_usage_perc{engine=\"0\"} 0.25\n"
	s, err := Parse(VLLM, strings.NewReader(page))
	if err != nil || s.KVUsage != 0.25 || s.HasCounters {
		t.Fatalf("got %+v, %v", s, err)
	}
}

// TestQueueMs is the formula's table.
func TestQueueMs(t *testing.T) {
	for _, tc := range []struct{ tokens, tps, want float64 }{
		{0, 1000, 0}, {1000, 1000, 1000}, {3 * 1200, 12000, 300}, {500, 0, 0}, {500, -1, 0},
	} {
		if got := QueueMs(tc.tokens, tc.tps); got != tc.want {
			t.Errorf("QueueMs(%v, %v) = %v, want %v", tc.tokens, tc.tps, got, tc.want)
		}
	}
}

// TestEstimator feeds a sequence of samples with exact expectations: the
// mean prompt from counter deltas, throughput only from saturated windows
// of at least ThroughputWindow, and queue_ms from both.
func TestEstimator(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := func(waiting, prompt, reqs float64) Sample {
		return Sample{Waiting: waiting, Running: 1, PromptTokens: prompt, Requests: reqs, HasCounters: true, BlockSize: 16, CapacityBlocks: 100}
	}
	var e Estimator
	steps := []struct {
		at             int
		s              Sample
		tokens, tps, q float64
		hasQ           bool
	}{
		{0, s(0, 10000, 10), 0, 0, 0, false},            // idle; lifetime mean 1000, nobody waits
		{100, s(4, 10000, 10), 4000, 0, 0, false},       // window starts; no throughput yet
		{600, s(4, 15000, 15), 4000, 0, 0, false},       // 0.5s: too short
		{1100, s(4, 20000, 20), 4000, 10000, 400, true}, // 10000 tokens in 1s
		{2100, s(2, 40000, 30), 4000, 12500, 320, true}, // mean 2000/req; 20000 t/s window: 10000 + (20000-10000)/4
		{2200, s(0, 40000, 30), 0, 12500, 0, true},      // idle: window resets, throughput kept
		{2300, s(1, 40000, 30), 2000, 12500, 160, true}, // saturated again: new window
		{2400, s(1, 100, 1), 100, 12500, 8, true},       // engine restart: counters fell
	}
	for i, st := range steps {
		l := e.Add(st.s, at(st.at))
		if float64(l.QueuedPrefillTokens) != st.tokens || l.PrefillTokensPerSecond != st.tps || l.QueueMs != st.q || l.HasQueueMs != st.hasQ ||
			l.BlockSizeTokens != 16 || l.KVCapacityBlocks != 100 || l.RunningRequests != 1 {
			t.Errorf("step %d: got %+v; want tokens %v tps %v queue %v (%v)", i, l, st.tokens, st.tps, st.q, st.hasQ)
		}
	}
}

// FuzzParse: no page makes Parse panic, and a parsed sample is clean.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/vllm.metrics", "testdata/sglang.metrics"} {
		b, _ := os.ReadFile(p)
		f.Add(b, true)
	}
	f.Add([]byte("vllm:num_requests_waiting NaN\nvllm:num_requests_running -1\n"), true)
	f.Fuzz(func(t *testing.T, page []byte, vllm bool) {
		e := SGLang
		if vllm {
			e = VLLM
		}
		s, err := Parse(e, strings.NewReader(string(page)))
		if err != nil {
			return
		}
		var est Estimator
		l := est.Add(s, time.Unix(0, 0))
		if l.KVCacheUsage < 0 || l.KVCacheUsage > 1 || l.QueueMs < 0 {
			t.Fatalf("unclean load %+v from %+v", l, s)
		}
	})
}
