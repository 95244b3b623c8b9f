package extproc_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/extproc"
)

// pdDeployment reports a disaggregated deployment "pd" of pool llama: a
// decode instance with 5 s of queued work and an idle prefill
// instance, so that a long uncached prompt is disaggregated.
func pdDeployment(e *env) {
	q := 5000.0
	e.report(&pb.ReportLoadRequest{Pool: "llama", Deployment: "pd", InstanceId: "dec", Address: "10.0.0.10:8000", Seq: 1,
		KvCapacityBlocks: 10000, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16, QueueMs: &q, Role: pb.PdRole_PD_ROLE_DECODE})
	e.report(&pb.ReportLoadRequest{Pool: "llama", Deployment: "pd", InstanceId: "pre", Address: "10.0.0.11:8000", Seq: 1,
		KvCapacityBlocks: 10000, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16, Role: pb.PdRole_PD_ROLE_PREFILL})
}

// TestPrefillerHeader: a long uncached prompt gets the decode instance as
// destination and the prefill instance in x-prefiller-host-port; a short
// one prefills locally, and a client's own x-prefiller-host-port is
// removed from it (and replaced on a disaggregated one).
func TestPrefillerHeader(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2})
	pdDeployment(e)
	long := func(s string) []byte {
		b, _ := json.Marshal(map[string]any{"model": "llama", "prompt": s + strings.Repeat(" disaggregate me please", 300)})
		return b
	}
	for _, tt := range []struct {
		name       string
		body       []byte
		spoof      bool
		wantPre    string
		wantRemove bool
	}{
		{"long prompt", long("one"), false, "10.0.0.11:8000", false},
		{"long prompt, spoofed header replaced", long("two"), true, "10.0.0.11:8000", false},
		{"the same long prompt again: cached on the decode instance", long("two"), false, "", false},
		{"short prompt", []byte(`{"model":"llama","prompt":"hi"}`), false, "", false},
		{"short prompt, spoofed header removed", []byte(`{"model":"llama","prompt":"hi"}`), true, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var kv []string
			if tt.spoof {
				kv = []string{"x-prefiller-host-port", "evil.example:80"}
			}
			rs, err := e.exchange(context.Background(), reqHeaders("POST", "/v1/completions", false, duplex, kv...), reqBody(tt.body, true))
			if err != nil {
				t.Fatal(err)
			}
			d := decisionOf(t, rs)
			if d.header != "10.0.0.10:8000" {
				t.Fatalf("destination %q, want the decode instance alone", d.header)
			}
			if got := d.extra["x-prefiller-host-port"]; got != tt.wantPre {
				t.Fatalf("x-prefiller-host-port %q, want %q", got, tt.wantPre)
			}
			if tt.wantPre != "" && d.extra["x-prefixroute-prefill-instance"] != "pre" {
				t.Fatalf("x-prefixroute-prefill-instance %q", d.extra["x-prefixroute-prefill-instance"])
			}
			if got := removed(rs); slices.Contains(got, "x-prefiller-host-port") != tt.wantRemove {
				t.Fatalf("removed headers %v, want x-prefiller-host-port removed: %v", got, tt.wantRemove)
			}
		})
	}
}

// removed lists the headers the responses remove.
func removed(rs []*extprocv3.ProcessingResponse) []string {
	var out []string
	for _, r := range rs {
		if h := r.GetRequestHeaders(); h != nil {
			out = append(out, h.GetResponse().GetHeaderMutation().GetRemoveHeaders()...)
		}
		if b := r.GetRequestBody(); b != nil {
			out = append(out, b.GetResponse().GetHeaderMutation().GetRemoveHeaders()...)
		}
	}
	return out
}
