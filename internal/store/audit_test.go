package store

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"
)

func TestAuditLog(t *testing.T) {
	clock := testClock()
	var times []time.Time
	s := openStore(t, t.TempDir(), Options{Now: func() time.Time {
		now := clock()
		times = append(times, now)
		return now
	}})
	p1 := defaultPolicy()
	p2 := p1
	p2.DeltaMs = 40
	steps := []func() error{
		func() error { _, err := s.SetWeights("chat", map[string]float64{"a": 1}, 0, "alice"); return err },
		func() error { _, err := s.SetWeights("chat", map[string]float64{"a": 0, "b": 0}, 1, "bob"); return err },
		func() error { _, err := s.SetPolicy("chat", p1, "carol"); return err },
		func() error { _, err := s.SetPolicy("chat", p2, "carol"); return err },
		func() error { _, err := s.SetWeights("chat", map[string]float64{"a": 1}, 1, "stale"); return err }, // refused
	}
	for i, step := range steps {
		if err := step(); (err != nil) != (i == 4) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	// policyObj is a policy as the audit log shows it.
	policyObj := func(deltaMs string) map[string]any {
		return map[string]any{
			"strategy": "softmax", "lambda_h": json.Number("10"), "delta_ms": json.Number(deltaMs),
			"threshold_ratio": json.Number("0.1"), "threshold_min_ms": json.Number("20"),
			"batch_wait_ms": json.Number("0"), "block_size_tokens": json.Number("16"),
			"default_prefill_tokens_per_second": json.Number("10000"), "max_kv_usage": json.Number("0.95"),
			"max_queue_ms": json.Number("0"), "deployment_delta_ms": json.Number("0"),
			"stale_after": "2s", "forget_after": "30s", "default_kv_capacity_blocks": json.Number("16384"),
			"on_saturation": "least_loaded", "doubling_context_tokens": json.Number("17000"),
			"on_slo_miss": "best_effort", "calibration": "apply",
			"pd_min_uncached_tokens": json.Number("512"), "pd_transfer_ms_per_token": json.Number("0.005"), "pd_fallback": "local", "pd_mode": "conditional",
			"short_lanes": json.Number("0"), "short_lane_max_prefill_ms": json.Number("400"),
			"pd_interference_weight": json.Number("0.1"), "pd_decode_running_ms": json.Number("5"),
			"queue_ttl": "30s", "queue_max_waiting": json.Number("1000"), "queue_max_per_band": json.Number("1000"), "dispatch_spacing_ms": json.Number("0"),
		}
	}
	want := []map[string]any{
		{"caller": "alice", "pool": "chat", "kind": "weights", "old": nil,
			"new": map[string]any{"a": json.Number("1")}, "version": json.Number("1"), "drain": false},
		{"caller": "bob", "pool": "chat", "kind": "weights", "old": map[string]any{"a": json.Number("1")},
			"new": map[string]any{"a": json.Number("0"), "b": json.Number("0")}, "version": json.Number("2"), "drain": true},
		{"caller": "carol", "pool": "chat", "kind": "policy", "old": nil,
			"new": policyObj("20"), "version": json.Number("1"), "drain": false},
		{"caller": "carol", "pool": "chat", "kind": "policy", "old": policyObj("20"),
			"new": policyObj("40"), "version": json.Number("2"), "drain": false},
	}
	got := auditLines(t, s)
	if len(got) != len(want) {
		t.Fatalf("%d audit records; want %d", len(got), len(want))
	}
	for i := range want {
		ts, err := time.Parse(time.RFC3339Nano, got[i]["time"].(string))
		if err != nil || !ts.Equal(times[i]) || ts.Location() != time.UTC {
			t.Errorf("record %d: time %v (%v); want %v in UTC", i, got[i]["time"], err, times[i])
		}
		delete(got[i], "time")
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("record %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}

func TestAuditLogMovedAside(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	if _, err := s.SetWeights("chat", map[string]float64{"a": 1}, 0, "t"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s.AuditLogPath(), s.AuditLogPath()+".1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetWeights("chat", map[string]float64{"a": 2}, 1, "t"); err != nil {
		t.Fatal(err)
	}
	if lines := auditLines(t, s); len(lines) != 1 || lines[0]["version"] != json.Number("2") {
		t.Errorf("new audit log = %v; want the version 2 record only", lines)
	}
}
