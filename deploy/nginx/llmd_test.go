package nginx

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/pdtest"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestNginxDrivesTheLlmdSidecar: nginx in front of a disaggregated
// deployment as llm-d deploys it (internal/pdtest's stand-ins: a prefill
// engine, and a decode engine behind a stand-in of llm-d's routing
// sidecar, which reads x-prefiller-host-port and runs the prefill leg
// there, then the decode leg with vLLM NixlConnector's
// kv_transfer_params). A long uncached prompt through nginx is prefilled
// on the prefill engine and decoded on the decode engine; a short one, and
// the long one again (now cached on the decode engine), are prefilled
// locally, though the client sends its own x-prefiller-host-port, which
// would otherwise make the sidecar send a prefill leg there.
func TestNginxDrivesTheLlmdSidecar(t *testing.T) {
	nginxBinary(t)
	sc := servertest.Start(t, servertest.RealClock())
	pre, err := pdtest.StartEngine(sc.Conn, "llama", "a", "a-prefill", "prefill", prefillTPS, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, pre.Close) })
	side, err := pdtest.ListenSidecar()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, side.Close) })
	dec, err := pdtest.StartEngine(sc.Conn, "llama", "a", "a-decode", "decode", decodeTPS, side.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, dec.Close) })
	side.Serve(dec.Addr)
	servertest.Eventually(t, "the sidecar lists a-prefill and a-decode as reporting", func() bool {
		resp, err := sc.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: "llama"})
		ok := 0
		for _, in := range resp.GetInstances() {
			if in.GetState() == pb.InstanceState_INSTANCE_STATE_OK {
				ok++
			}
		}
		return err == nil && ok == 2
	})
	nx := startNginx(t, sc.HTTPAddr(), nil)

	long := strings.Repeat(" the same long document, uncached where it was not seen;", 220) // ~3,000 tokens
	for _, tc := range []struct {
		what, prompt, answer string
		legs, local          int64 // prefill legs and local prefills after it
	}{
		{"long uncached prompt", long, "decoded after remote prefill", 1, 0},
		{"short prompt", "hello there", "decoded after local prefill", 1, 1},
		{"long prompt, cached on the decode engine", long, "decoded after local prefill", 1, 2},
	} {
		status, text := completeThrough(t, nx, tc.prompt)
		if status != http.StatusOK || text != tc.answer || pre.PrefillLegs.Load() != tc.legs || dec.LocalPrefills.Load() != tc.local {
			t.Fatalf("%s: %d %q; prefill legs %d (want %d), local prefills %d (want %d); sidecar: %d prefill legs, %d failed, %d decode only",
				tc.what, status, text, pre.PrefillLegs.Load(), tc.legs, dec.LocalPrefills.Load(), tc.local,
				side.PrefillLegs.Load(), side.PrefillFailures.Load(), side.DecodeOnly.Load())
		}
	}
	if n := side.PrefillFailures.Load(); n != 0 {
		t.Errorf("the llm-d sidecar stand-in had %d failed prefill legs, want 0", n)
	}
}

// completeThrough sends an OpenAI completions request for prompt through
// nginx with a client's own prefill headers, and returns the status and
// the completion's text.
func completeThrough(t *testing.T, p *nginxProc, prompt string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "llama", "prompt": prompt, "max_tokens": 16})
	req, _ := http.NewRequest(http.MethodPost, p.url("/v1/completions"), strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range spoofed {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	if json.Unmarshal(b, &out) != nil || len(out.Choices) == 0 {
		return resp.StatusCode, string(b)
	}
	return resp.StatusCode, out.Choices[0].Text
}

// closeOK reports a failed Close as a test error.
func closeOK(t *testing.T, close func() error) {
	t.Helper()
	if err := close(); err != nil {
		t.Error(err)
	}
}
