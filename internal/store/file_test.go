package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// validState is a state file with one pool, written by hand.
const validState = `{"format": 1, "pools": {"chat": {"weights": {"a": 1, "b": 9}, "weights_version": 3,
  "policy": {"strategy": "argmin", "stale_after": "1500ms"}, "policy_version": 2,
  "updated_at": "2026-01-02T03:04:05.5Z"}}}`

func TestOpenCorruptState(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantMsg string
	}{
		{"garbage", "this is not JSON\x00\x01", "invalid JSON at byte 2: invalid character"},
		{"truncated JSON", validState[:len(validState)/2], "invalid JSON"},
		{"empty file", "", "the file is empty"},
		{"trailing garbage", validState + "}", "invalid JSON"},
		{"not an object", `[1, 2]`, "invalid JSON"},
		{"unknown format", `{"format": 2, "pools": {"chat": {"shards": 3}}}`, "unknown format 2; this prefixroute reads format 1 only"},
		{"format as string", `{"format": "1", "pools": {}}`, `unknown format "1"`},
		{"missing format", `{"pools": {}}`, `no "format" field`},
		{"unknown field", `{"format": 1, "pools": {"chat": {"policy": {"lamda_h": 3}}}}`, `unknown field "lamda_h"`},
		{"wrong type", `{"format": 1, "pools": {"chat": {"weights": {"a": "1"}}}}`, "invalid content"},
		{"negative weight", `{"format": 1, "pools": {"chat": {"weights": {"a": -1}}}}`,
			`pool "chat": invalid weights: weight of deployment "a" is -1`},
		{"empty weights", `{"format": 1, "pools": {"chat": {"weights": {}}}}`, "no deployments"},
		{"bad pool name", `{"format": 1, "pools": {"": {}}}`, "pool name is empty"},
		{"unknown strategy", `{"format": 1, "pools": {"chat": {"policy": {"strategy": "fastest"}}}}`,
			`pool "chat": policy: unknown strategy "fastest"`},
		{"policy out of range", `{"format": 1, "pools": {"chat": {"policy": {"delta_ms": 0}}}}`,
			`pool "chat": policy: invalid policy: delta_ms must be in [0.001, 1000000] ms, got 0`},
		{"wrong kind", `{"format": 1, "pools": {"chat": {"policy": {"block_size_tokens": "16"}}}}`,
			`pool "chat": policy: block_size_tokens: json: cannot unmarshal string`},
		{"bad duration", `{"format": 1, "pools": {"chat": {"policy": {"stale_after": "2 seconds"}}}}`,
			`stale_after: "2 seconds" is not a duration`},
		{"unknown ramp state", `{"format": 1, "pools": {"chat": {"ramp": {"id": 1, "state": "stopped", "steps": [{"weights": {"b": 1}, "after": "1m"}]}}}}`,
			`pool "chat": ramp: unknown ramp state "stopped"`},
		{"ramp without steps", `{"format": 1, "pools": {"chat": {"ramp": {"id": 1, "state": "done", "steps": []}}}}`,
			`pool "chat": ramp: invalid ramp: no steps`},
		{"ramp applied past its steps", `{"format": 1, "pools": {"chat": {"ramp": {"id": 1, "state": "done", "applied": 2, "steps": [{"weights": {"b": 1}, "after": "1m"}]}}}}`,
			`applied 2 is outside 0..1 steps`},
		{"running ramp without next_at", `{"format": 1, "pools": {"chat": {"ramp": {"id": 1, "state": "running", "steps": [{"weights": {"b": 1}, "after": "1m"}]}}}}`,
			`a running ramp needs next_at`},
		{"ramp step bad wait", `{"format": 1, "pools": {"chat": {"ramp": {"id": 1, "state": "done", "steps": [{"weights": {"b": 1}, "after": "soon"}]}}}}`,
			`steps[0].after "soon" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, stateFileName)
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, Options{})
			if err == nil {
				closeStore(t, s)
				t.Fatal("Open succeeded on a corrupt state file")
			}
			if !errors.Is(err, ErrCorruptState) {
				t.Errorf("error %v does not wrap ErrCorruptState", err)
			}
			for _, want := range []string{path, tt.wantMsg, "move it aside to start empty"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if got := readFile(t, path); string(got) != tt.content {
				t.Errorf("state file changed to %q", got)
			}
			// The failed Open released the lock: once fixed, the dir opens.
			if err := os.WriteFile(path, []byte(validState), 0o600); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, dir, Options{})
			if c, ok := s.Pool("chat"); !ok || c.WeightsVersion != 3 {
				t.Errorf("after fixing the file: chat = %+v, %v", c, ok)
			}
		})
	}
}

func TestOpenUnreadableState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, stateFileName)
	if err := os.Mkdir(path, 0o700); err != nil { // unreadable even by root
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrCorruptState) || !strings.Contains(err.Error(), path+": cannot read it") {
		t.Fatalf("Open = %v; want ErrCorruptState naming %s", err, path)
	}
}

func TestLoadHandWrittenState(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFileName), []byte(validState), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir, Options{})
	wantPolicy := defaultPolicy()
	wantPolicy.Strategy = scheduler.Argmin
	wantPolicy.StaleAfter = 1500 * time.Millisecond
	want := map[string]PoolConfig{"chat": {
		Weights:        map[string]float64{"a": 1, "b": 9},
		WeightsVersion: 3,
		Policy:         &wantPolicy,
		PolicyVersion:  2,
		UpdatedAt:      time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC),
	}}
	if got := s.Pools(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Pools() =\n %+v\nwant\n %+v", got, want)
	}
}

func TestPolicyJSONDefaults(t *testing.T) {
	tests := []struct {
		json string
		edit func(*scheduler.Policy)
	}{
		{`{}`, func(*scheduler.Policy) {}},
		{`{"lambda_h": 3}`, func(p *scheduler.Policy) { p.LambdaH = 3 }},
		{`{"lambda_h": 0}`, func(p *scheduler.Policy) { p.LambdaH = 0 }}, // 0 is a value, not "absent"
		{`{"lambda_h": null}`, func(*scheduler.Policy) {}},
		// every key as the state file of 16a42ca wrote it
		{`{"strategy": "argmin", "lambda_h": 5, "delta_ms": 10, "threshold_ratio": 0.2, "threshold_min_ms": 30,
			"batch_wait_ms": 1, "block_size_tokens": 32, "default_prefill_tokens_per_second": 20000, "max_kv_usage": 0.9,
			"max_queue_ms": 100, "deployment_delta_ms": 50, "stale_after": "3s", "forget_after": "1m0s",
			"default_kv_capacity_blocks": 1000, "on_saturation": "shed"}`, func(p *scheduler.Policy) {
			*p = scheduler.Policy{Strategy: scheduler.Argmin, LambdaH: 5, DeltaMs: 10, ThresholdRatio: 0.2, ThresholdMinMs: 30,
				BatchWaitMs: 1, BlockSizeTokens: 32, DefaultPrefillTokensPerSecond: 20000, MaxKVUsage: 0.9, MaxQueueMs: 100,
				DeploymentDeltaMs: 50, StaleAfter: 3 * time.Second, ForgetAfter: time.Minute, DefaultKVCapacityBlocks: 1000,
				OnSaturation:          scheduler.SaturationShed,
				DoublingContextTokens: scheduler.DefaultDoublingContextTokens, // absent from that file: the default
				PDMinUncachedTokens:   scheduler.DefaultPDMinUncachedTokens, PDTransferMsPerToken: scheduler.DefaultPDTransferMsPerToken,
				PDInterferenceWeight: scheduler.DefaultPDInterferenceWeight, PDDecodeRunningMs: scheduler.DefaultPDDecodeRunningMs,
				ShortLaneMaxPrefillMs: scheduler.DefaultShortLaneMaxPrefillMs,
				QueueTTL:              30 * time.Second, QueueMaxWaiting: 1000, QueueMaxPerBand: 1000}
		}},
		{`{"doubling_context_tokens": 0}`, func(p *scheduler.Policy) { p.DoublingContextTokens = 0 }}, // off, not "absent"
		{`{"doubling_context_tokens": 33000}`, func(p *scheduler.Policy) { p.DoublingContextTokens = 33000 }},
		{`{"strategy": "threshold", "forget_after": "1m30s", "block_size_tokens": 64}`, func(p *scheduler.Policy) {
			p.Strategy, p.ForgetAfter, p.BlockSizeTokens = scheduler.Threshold, 90*time.Second, 64
		}},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			pools, err := decodeState([]byte(`{"format": 1, "pools": {"p": {"policy": ` + tt.json + `}}}`))
			if err != nil {
				t.Fatal(err)
			}
			want := defaultPolicy()
			tt.edit(&want)
			if got := *pools["p"].Policy; got != want {
				t.Errorf("policy =\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

// TestPolicyJSONCoversEveryField sets every field of a Policy to a value
// other than its default (and valid) and checks that it survives the state file. It
// fails when a field is added to scheduler.Policy but not to policyJSON.
func TestPolicyJSONCoversEveryField(t *testing.T) {
	p := defaultPolicy()
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case f.Type() == reflect.TypeFor[scheduler.Strategy]():
			f.Set(reflect.ValueOf(scheduler.Argmin))
		case f.Type() == reflect.TypeFor[scheduler.Saturation]():
			f.Set(reflect.ValueOf(scheduler.SaturationShed))
		case f.Type() == reflect.TypeFor[scheduler.SLOMiss]():
			f.Set(reflect.ValueOf(scheduler.SLOShed))
		case f.Type() == reflect.TypeFor[scheduler.CalibrationMode]():
			f.Set(reflect.ValueOf(scheduler.CalibrationObserve))
		case f.Type() == reflect.TypeFor[scheduler.PDFallback]():
			f.Set(reflect.ValueOf(scheduler.PDFallbackFail))
		case f.Type() == reflect.TypeFor[scheduler.PDMode]():
			f.Set(reflect.ValueOf(scheduler.PDAlways))
		case name == "ShortLanes":
			f.SetUint(3) // in [0, 8]
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(int64(time.Duration(i+1)*time.Second + 7*time.Millisecond))
		case f.CanFloat() && f.Float() != 0:
			f.SetFloat(f.Float() / 2) // stays in range: max_kv_usage in (0, 1]
		case f.CanFloat():
			f.SetFloat(float64(i) + 0.25)
		case f.CanUint():
			f.SetUint(uint64(i) + 1000)
		case f.CanInt():
			f.SetInt(int64(i) + 1000)
		default:
			t.Fatalf("Policy.%s has type %s, which this test does not know: extend policyJSON and this test", name, f.Type())
		}
	}
	data, err := encodeState(map[string]PoolConfig{"p": {Policy: &p}})
	if err != nil {
		t.Fatal(err)
	}
	pools, err := decodeState(data)
	if err != nil {
		t.Fatal(err)
	}
	got := reflect.ValueOf(*pools["p"].Policy)
	for i := range v.NumField() {
		if !reflect.DeepEqual(got.Field(i).Interface(), v.Field(i).Interface()) {
			t.Errorf("Policy.%s = %v after the state file; want %v (is it in policyJSON?)",
				v.Type().Field(i).Name, got.Field(i), v.Field(i))
		}
	}
	for _, key := range []string{`"lambda_h": 5`, `"strategy": "argmin"`, `"stale_after": "`, `"on_saturation": "shed"`} {
		if !bytes.Contains(data, []byte(key)) {
			t.Errorf("state file does not contain %s:\n%s", key, data)
		}
	}
}

// TestPolicyJSONLoadedReencodes: a policy object read from a file writes
// back the keys it was read with.
func TestPolicyJSONLoadedReencodes(t *testing.T) {
	var j policyJSON
	if err := json.Unmarshal([]byte(`{"lambda_h": 3, "strategy": "argmin"}`), &j); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(&j)
	if err != nil || string(data) != `{"lambda_h":3,"strategy":"argmin"}` {
		t.Fatalf("Marshal = %s, %v", data, err)
	}
}
