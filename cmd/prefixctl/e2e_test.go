package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// TestEndToEnd drives a real sidecar through run: pools, instances,
// weights with a compare-and-set conflict, policy, pick --explain, and the
// error exits.
func TestEndToEnd(t *testing.T) {
	d := startDaemon(t, true)
	addr := d.Addr()
	expect(t, ctl(addr, "pools"), 0, "no pools yet")

	prompt := "0-63"
	tokens, _ := parseTokens(prompt)
	hashes := prefixhash.Tokens(nil, prefixhash.Seed("m", ""), 16, tokens)
	report(t, addr, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "vllm-a-0", Address: "10.0.0.1:8000",
		CacheEvents: true, Snapshot: func() []uint64 { return hashes }},
		client.Load{QueueMs: 100, HasQueueMs: true, PrefillTokensPerSecond: 10000})
	report(t, addr, client.ReporterOptions{Pool: "m", Deployment: "B", InstanceID: "vllm-b-0", Address: "10.0.0.2:8000",
		CacheEvents: true}, client.Load{QueueMs: 20, HasQueueMs: true, PrefillTokensPerSecond: 10000})

	expect(t, ctl(addr, "instances", "m", "--wait", "2", "--wait-timeout", "20s"), 0,
		"pool m: 2 instances, 2 ok", "vllm-a-0", "10.0.0.1:8000", "100 ms", "4 blk", "vllm-b-0", "20 ms", "0 blk")
	var list pb.ListInstancesResponse
	fromJSON(t, ctl(addr, "instances", "m", "-o", "json"), &list)
	if len(list.GetInstances()) != 2 || list.GetInstances()[0].GetCachedBlocks() != 4 {
		t.Errorf("instances -o json: %v", &list)
	}
	expect(t, ctl(addr, "pools"), 0, "POOL", "m", "never set")
	expect(t, ctl(addr, "weights", "get", "m"), 0, "weights never set", "equal split")

	t.Run("weights", func(t *testing.T) {
		// A misspelt pool is refused and not created; --create creates it.
		expect(t, ctl(addr, "weights", "set", "mm", "A=1"), exitRefused, `NotFound: pool not found: "mm"`,
			"run 'prefixctl weights set --create'")
		expect(t, ctl(addr, "policy", "set", "mm", "delta_ms=10"), exitRefused, `pool not found: "mm"`, "policy set --create")
		expect(t, ctl(addr, "weights", "get", "mm"), exitRefused, "NotFound")
		expect(t, ctl(addr, "policy", "set", "new", "delta_ms=10", "--create"), 0)
		expect(t, ctl(addr, "weights", "set", "new", "A=1"), 0, "version 1")
		expect(t, ctl(addr, "weights", "set", "m", "A=1", "B=9"), 0, "weights set, version 1", "90%")
		expect(t, ctl(addr, "weights", "set", "m", "A=1", "B=9", "--expect-version", "1"), 0, "version 2")
		expect(t, ctl(addr, "weights", "set", "--expect-version", "1", "m", "A=5", "B=5"), exitConflict,
			"prefixctl: weights set: version conflict: expected 1, current 2 (re-read with 'prefixctl weights get m')")
		var w pb.GetWeightsResponse
		fromJSON(t, ctl(addr, "-o", "json", "weights", "get", "m"), &w)
		if w.GetVersion() != 2 || w.GetWeights()["B"] != 9 || !w.GetWeightsSet() {
			t.Errorf("after the conflict: %v", &w)
		}
		expect(t, ctl(addr, "weights", "get", "m"), 0, "weights version 2", "configured", "10%")
	})

	t.Run("pick", func(t *testing.T) {
		expect(t, ctl(addr, "pick", "m", "--tokens", prompt, "--seed", "1", "--explain"), 0,
			"picked vllm-", "request: 4 blocks, 64 tok; weights version 2; seed 1", "policy: softmax, delta 20 ms",
			"DEPLOYMENT", "HIT", "P(d)", "INSTANCE", "PREFILL", "QUEUE", "COST", "P(i|d)", "deployment A, P(d) 99.1%",
			"deployment B, P(d) 0.87%", "* vllm-")
		var p pb.PickResponse
		fromJSON(t, ctl(addr, "pick", "m", "--tokens", prompt, "--seed", "1", "-o", "json"), &p)
		for _, in := range p.GetDecision().GetInstances() {
			want := map[string]uint32{"vllm-a-0": 4, "vllm-b-0": 0}[in.GetInstanceId()]
			if in.GetMatchedBlocks() != want {
				t.Errorf("%s matched %d blocks, want %d", in.GetInstanceId(), in.GetMatchedBlocks(), want)
			}
		}
		if p.GetDecision().GetSeed() != 1 || p.GetDecision().GetBlocks() != 4 {
			t.Errorf("decision %v", p.GetDecision())
		}
		var h strings.Builder
		for i, x := range hashes {
			if i > 0 {
				h.WriteByte(',')
			}
			h.WriteString(fmtHash(x))
		}
		expect(t, ctl(addr, "hash", "m", "--tokens", prompt), 0, h.String())
		expect(t, ctl(addr, "pick", "m", "--hashes", h.String(), "--explain", "--exclude", "vllm-a-0"), 0,
			"picked vllm-b-0", "excluded_by_request")
		expect(t, ctl(addr, "pick", "m", "--text", "hello, world"), 0, "picked vllm-")
		expect(t, ctl(addr, "pick", "nope"), exitRefused, "prefixctl: pick: NotFound:", "prefixctl pools")
		expect(t, ctl(addr, "pick", "m", "--tokens", "1", "--text", "x"), exitUsage, "give the prompt once")
	})

	t.Run("policy", func(t *testing.T) {
		expect(t, ctl(addr, "policy", "get", "m"), 0, "default policy", "softmax", "20 ms", "95%", "2s")
		expect(t, ctl(addr, "policy", "set", "m", "strategy=threshold", "delta_ms=10", "max_kv_usage=90%"), 0,
			"policy version 1", "threshold", "10 ms", "90%")
		var p pb.GetPolicyResponse
		fromJSON(t, ctl(addr, "policy", "get", "m", "-o", "json"), &p)
		if p.GetVersion() != 1 || p.GetPolicy().GetStrategy() != pb.Strategy_STRATEGY_THRESHOLD ||
			p.GetPolicy().GetDeltaMs() != 10 || p.GetPolicy().GetMaxKvUsage() != 0.9 || p.GetPolicy().GetLambdaH() != 10 {
			t.Errorf("policy after set: %v", &p)
		}
		expect(t, ctl(addr, "pick", "m", "--tokens", prompt, "--explain"), 0, "policy: threshold, band max(10% of min cost, 20 ms)")
		expect(t, ctl(addr, "policy", "set", "m", "lambda_h=1000"), exitRefused, "prefixctl: policy set: InvalidArgument:")
		expect(t, ctl(addr, "policy", "set", "m", "bogus=1"), exitUsage, `unknown policy key "bogus"`, "usage: prefixctl policy set")
		expect(t, ctl(addr, "policy", "get", "nope"), exitRefused, "NotFound")
	})

	t.Run("drained", func(t *testing.T) {
		expect(t, ctl(addr, "weights", "set", "m", "A=0"), exitRefused, "FailedPrecondition", "drain guard", "prefixctl weights set --force")
		expect(t, ctl(addr, "weights", "set", "m", "A=1", "Z=1"), exitRefused, `never seen "Z"`)
		expect(t, ctl(addr, "weights", "set", "m", "A=0", "--force"), 0, "the pool is drained")
		expect(t, ctl(addr, "pick", "m"), exitRefused, "prefixctl: pick: FailedPrecondition:", "drained")
	})

	t.Run("env", func(t *testing.T) {
		t.Setenv("PREFIXCTL_ADDR", addr)
		var out, errb bytes.Buffer
		if code := run([]string{"pools"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "m") {
			t.Errorf("PREFIXCTL_ADDR: exit %d, %s %s", code, out.String(), errb.String())
		}
	})
}

// TestExitCodes: usage errors, an unreachable sidecar and a silent one.
func TestExitCodes(t *testing.T) {
	dead, silent := deadAddr(t), silentAddr(t)
	for _, tc := range []struct {
		name  string
		addr  string
		args  []string
		code  int
		parts []string
	}{
		{"unreachable", dead, []string{"pools"}, exitUnreachable,
			[]string{"prefixctl: pools: sidecar at " + dead + " unreachable (Unavailable:", "connection refused", "make run"}},
		{"unreachable weights set", dead, []string{"weights", "set", "m", "A=1"}, exitUnreachable, []string{"unreachable"}},
		{"unreachable pick", dead, []string{"pick", "m", "--tokens", "0-31"}, exitUnreachable, []string{"unreachable"}},
		{"silent", silent, []string{"--timeout", "200ms", "instances", "m"}, exitUnreachable,
			[]string{"did not answer within 200ms (DeadlineExceeded)"}},
		{"no command", dead, nil, exitUsage, []string{"no command given"}},
		{"unknown command", dead, []string{"frobnicate"}, exitUsage, []string{`unknown command "frobnicate"`}},
		{"unknown subcommand", dead, []string{"weights", "delete", "m"}, exitUsage, []string{`unknown command "weights delete"`}},
		{"missing pool", dead, []string{"weights", "get"}, exitUsage, []string{"missing arguments", "usage: prefixctl weights get POOL"}},
		{"extra argument", dead, []string{"pools", "x"}, exitUsage, []string{`unexpected argument "x"`}},
		{"no weights", dead, []string{"weights", "set", "m"}, exitUsage, []string{"missing arguments"}},
		{"bad weight", dead, []string{"weights", "set", "m", "A=x"}, exitUsage, []string{`weight "x" is not a finite number`}},
		{"bad flag", dead, []string{"pools", "--bogus"}, exitUsage, []string{"unknown flag --bogus"}},
		{"bad output", dead, []string{"pools", "-o", "yaml"}, exitUsage, []string{`-o "yaml": want table or json`}},
		{"bad tokens", dead, []string{"pick", "m", "--tokens", "5-1"}, exitUsage, []string{"FIRST <= LAST"}},
		{"instance run without address", dead, []string{"instance", "run", "m", "A", "a-1"}, exitUsage, []string{"--address is required"}},
		{"instance run never acked", dead, []string{"instance", "run", "m", "A", "a-1", "--address", "x:1", "--for", "300ms"},
			exitUnreachable, []string{"unreachable"}},
		{"help", dead, []string{"help"}, 0, []string{"Exit codes:", "4  version conflict"}},
		{"help command", dead, []string{"help", "instance", "run"}, 0, []string{"TEST/DEMO TOOL", "--stored H,..."}},
		{"-h", dead, []string{"weights", "set", "-h"}, 0, []string{"--expect-version N"}},
		{"help unknown", dead, []string{"help", "nope"}, exitUsage, []string{`unknown command "nope"`}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, ctl(tc.addr, tc.args...), tc.code, tc.parts...) })
	}
}

// TestInstanceRun: the demo instance reports its identity, load and
// cached blocks until its context ends, then exits 0.
func TestInstanceRun(t *testing.T) {
	d := startDaemon(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"--addr", d.Addr(), "instance", "run", "m", "A", "a-1", "--address", "10.0.0.9:8000",
			"--queue-ms", "42", "--tps", "5000", "--stored", "0x1,0x2,3"}, &out, &errb)
	}()
	var last result
	testwait.EventuallyOK(t, func() string {
		if last = ctl(d.Addr(), "instances", "m"); strings.Contains(last.stdout, "a-1") && strings.Contains(last.stdout, "3 blk") {
			return ""
		}
		return fmt.Sprintf("the instance is not listed with 3 blocks: %v", last)
	})
	expect(t, last, 0, "10.0.0.9:8000", "42 ms", "5000 tok/s")
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("instance run exited %d: %s %s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "test/demo tool") || !strings.Contains(out.String(), "a-1 stopped") {
		t.Errorf("instance run output: %s", out.String())
	}
}

func TestRampCommands(t *testing.T) {
	d := startDaemon(t, true)
	addr := d.Addr()
	expect(t, ctl(addr, "ramp", "start", "chat", "a=1", "--over", "4m", "--every", "1m"), 1, `pool not found: "chat"`,
		"prefixctl ramp start --create")
	expect(t, ctl(addr, "weights", "set", "chat", "a=1", "--create"), 0)
	expect(t, ctl(addr, "ramp", "start", "chat", "b=1", "--over", "4m", "--every", "1m"), 1, `never seen "b"`, "prefixctl ramp start --force")
	expect(t, ctl(addr, "weights", "set", "chat", "a=1", "b=0"), 0)
	expect(t, ctl(addr, "ramp", "status", "chat"), 1, "never had a ramp")
	expect(t, ctl(addr, "ramp", "start", "chat", "b=1"), 2, "needs --over D and --every D")
	expect(t, ctl(addr, "ramp", "start", "chat", "--steps", "10m:a=1;x"), 2, `step 2 "x"`)
	expect(t, ctl(addr, "ramp", "start", "chat", "b=1", "--over", "4m", "--every", "1m"), 0,
		"ramp 1 running: step 0 of 4 applied, next in 1m0s, done in 4m0s", "    1   1m0s   75%   25%  next")
	expect(t, ctl(addr, "weights", "set", "chat", "a=2"), 1, "ramp 1 is running", "abort it first")
	expect(t, ctl(addr, "weights", "get", "chat"), 0, "ramp 1 running: step 0 of 4 applied")
	expect(t, ctl(addr, "ramp", "pause", "chat"), 0, "ramp 1 paused", "paused by 127.0.0.1:")
	expect(t, ctl(addr, "ramp", "resume", "chat", "--id", "2"), 1, "ramp 2 is not the current ramp (1)")
	expect(t, ctl(addr, "ramp", "resume", "chat", "--id", "1"), 0, "ramp 1 running")
	r := ctl(addr, "-o", "json", "ramp", "abort", "chat")
	var ab pb.AbortRampResponse
	fromJSON(t, r, &ab)
	if ab.GetRamp().GetState() != pb.RampState_RAMP_STATE_ABORTED || ab.GetRamp().GetStepsApplied() != 0 {
		t.Fatalf("abort -o json: %v", ab.GetRamp())
	}
	expect(t, ctl(addr, "ramp", "abort", "chat"), 1, "already aborted")
	expect(t, ctl(addr, "weights", "set", "chat", "a=2"), 0)
}

func TestMigrationCommand(t *testing.T) {
	d := startDaemon(t, true)
	addr := d.Addr()
	report(t, addr, client.ReporterOptions{Pool: "chat", Deployment: "a", InstanceID: "a-0", Address: "a:1"},
		client.Load{PrefillTokensPerSecond: 16000})
	report(t, addr, client.ReporterOptions{Pool: "chat", Deployment: "b", InstanceID: "b-0", Address: "b:1"},
		client.Load{PrefillTokensPerSecond: 16000})
	expect(t, ctl(addr, "instances", "chat", "--wait", "2"), 0)
	expect(t, ctl(addr, "migration", "chat", "--from", "a"), 2, "--from A --to B")
	expect(t, ctl(addr, "migration", "chat", "--from", "a", "--to", "zz"), 1, "NotFound", `"zz"`)
	// No picks yet: the clock is frozen, nothing is covered.
	expect(t, ctl(addr, "migration", "chat", "--from", "a", "--to", "b"), 0, "verdict: unknown: no picks in the window yet")
	expect(t, ctl(addr, "migration", "chat", "--from", "a", "--to", "b", "--check"), 5, "unknown: no picks")
	// Two picks on the frozen clock: a sample too small for a verdict,
	// whatever the headroom (exit 5 with what is missing).
	expect(t, ctl(addr, "pick", "chat", "--tokens", "0-63"), 0)
	expect(t, ctl(addr, "pick", "chat", "--tokens", "0-63"), 0)
	expect(t, ctl(addr, "migration", "chat", "--from", "a", "--to", "b"), 0, "window 5m0s: saw 0s of it (0%), 2 picks",
		"verdict: unknown: too little evidence in the window: it needs 28 more picks (has 2 of the 30 needed) and 1s more of the window covered (has 0s of the 1s needed)")
	expect(t, ctl(addr, "migration", "chat", "--from", "a", "--to", "b", "--check"), 5, "unknown: too little evidence", "28 more picks")
	r := ctl(addr, "-o", "json", "migration", "chat", "--from", "a", "--to", "b")
	var st pb.GetMigrationStatusResponse
	fromJSON(t, r, &st)
	if st.GetFrom() != "a" || st.GetTo() != "b" || len(st.GetDeployments()) != 2 || st.GetAbsorption().GetCanAbsorb() ||
		!strings.Contains(st.GetSampleMissing(), "28 more picks") {
		t.Fatalf("migration -o json: %v", &st)
	}
}

// TestQueueAgreesWithExplain: an instance that reports queued prefill
// tokens but neither queue_ms nor a throughput (prefixagent before it has
// measured one) shows the same QUEUE in 'instances' as in 'pick --explain':
// 3600 tokens at the policy's default 10000 tokens/s, 360 ms.
func TestQueueAgreesWithExplain(t *testing.T) {
	d := startDaemon(t, true)
	addr := d.Addr()
	report(t, addr, client.ReporterOptions{Pool: "q", Deployment: "A", InstanceID: "agent-fed", Address: "10.0.0.1:8000"},
		client.Load{WaitingRequests: 3, QueuedPrefillTokens: 3600})
	r := ctl(addr, "instances", "q", "--wait", "1", "--wait-timeout", "20s")
	expect(t, r, 0, "agent-fed", "~360 ms", "~ QUEUE: as Pick sees it")
	expect(t, ctl(addr, "pick", "q", "--tokens", "0-15", "--seed", "1", "--explain"), 0, "agent-fed", "360 ms")
}
