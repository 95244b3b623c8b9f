package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestSidecarManifest: deploy/kubernetes/prefixagent-sidecar.yaml parses,
// vLLM's --kv-events-config is the JSON its KVEventsConfig takes with a
// binding endpoint, and prefixagent accepts its arguments (the credential
// files aside).
func TestSidecarManifest(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/prefixagent-sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pod struct {
		Kind string
		Spec struct {
			Containers []struct {
				Name string
				Args []string
			}
		}
	}
	if err := yaml.Unmarshal(b, &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Kind != "Pod" || len(pod.Spec.Containers) != 2 {
		t.Fatalf("want a Pod with 2 containers, got %q with %d", pod.Kind, len(pod.Spec.Containers))
	}
	var kvConfig map[string]any
	for _, a := range pod.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--kv-events-config="); ok {
			if err := json.Unmarshal([]byte(v), &kvConfig); err != nil {
				t.Fatalf("--kv-events-config: %v", err)
			}
		}
	}
	if kvConfig["enable_kv_cache_events"] != true || kvConfig["publisher"] != "zmq" || !strings.Contains(kvConfig["endpoint"].(string), "*") {
		t.Fatalf("vLLM --kv-events-config = %v", kvConfig)
	}
	var args []string
	for _, a := range pod.Spec.Containers[1].Args {
		switch {
		case strings.HasPrefix(a, "--tls-ca="), strings.HasPrefix(a, "--token-file="):
			continue // files of the pod's secret
		case strings.HasPrefix(a, "--router="):
			a = "--router=127.0.0.1:1"
		case strings.HasPrefix(a, "--http-listen="):
			a = "--http-listen=off"
		}
		args = append(args, strings.NewReplacer("$(POD_NAME)", "llama-8b-a-0", "$(POD_IP)", "10.1.2.3").Replace(a))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // parse, check and start, then stop at once
	var stderr strings.Builder
	if code := run(ctx, args, &strings.Builder{}, &stderr); code != 0 {
		t.Fatalf("prefixagent %q: exit %d: %s", args, code, stderr.String())
	}
}

// TestInstances: two --instance flags start two agents (one stream to the
// router between them) and stop at once with the context.
func TestInstances(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	args := []string{"--engine", "sglang", "--pool", "m", "--deployment", "a", "--router", "127.0.0.1:1", "--http-listen", "off",
		"--instance", "id=g0,address=10.0.0.7:8000,metrics-url=http://127.0.0.1:30000/metrics",
		"--instance", "id=g1,address=10.0.0.7:8001,metrics-url=http://127.0.0.1:30001/metrics,deployment=b,data-parallel-rank=1"}
	var stderr strings.Builder
	if code := run(ctx, args, &strings.Builder{}, &stderr); code != 0 {
		t.Fatalf("prefixagent %q: exit %d: %s", args, code, stderr.String())
	}
	for _, want := range []string{"instance=g0", "instance=g1"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, stderr.String())
		}
	}
}

// TestUsage: bad command lines exit 2 with a message naming the problem.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "tgi"}, `--engine: unknown engine "tgi"; want vllm or sglang`},
		{[]string{"--engine", "vllm", "--pool", "m", "--deployment", "a"}, "pool, deployment, instance id and address are required"},
		{[]string{"--engine", "vllm", "--pool", "m", "--deployment", "a", "--address", "x:1", "--block-size", "-1"}, "must not be negative"},
		{[]string{"--engine", "vllm", "--router", "10.0.0.1:50051", "--token-file", "/dev/null"}, "--token-file"},
		{[]string{"--engine", "vllm", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"--engine", "vllm", "--pool", "m", "--deployment", "a", "--address", "x:1", "--role", "encode"}, `role "encode": want both, prefill or decode`},
		{[]string{"--engine", "vllm", "--pool", "m", "--deployment", "a", "--instance", "id=g0,port=1"}, `--instance "id=g0,port=1": unknown key "port"`},
		{[]string{"--engine", "vllm", "--pool", "m", "--deployment", "a", "--instance", "id=g0"}, `--instance "id=g0": id and address are required`},
		{[]string{"--engine", "vllm", "--pool", "m", "--deployment", "a", "--instance", "id=g0,address"}, `"address" is not key=value`},
		{[]string{"--engine", "vllm", "--pool", "m", "--deployment", "a", "--instance", "id=g0,address=x:1,data-parallel-rank=-1"}, `data-parallel-rank "-1" is not a rank`},
		{[]string{"--engine", "vllm", "--pool", "m", "--deployment", "a", "--instance", "id=g0,address=x:1", "--instance", "id=g0,address=x:2"}, `instance id "g0" given twice`},
	} {
		var stderr strings.Builder
		code := run(context.Background(), tc.args, &strings.Builder{}, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	var out strings.Builder
	if code := run(context.Background(), []string{"--version"}, &out, &strings.Builder{}); code != 0 || !strings.HasPrefix(out.String(), "prefixagent ") {
		t.Errorf("--version: exit %d, %q", code, out.String())
	}
}
