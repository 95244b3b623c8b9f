package pdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// Throughputs of the stand-ins: a prefill engine prefills at 20,000
// tokens/s, a decode engine at 2,000 tokens/s (its prefill competes with
// its decode batch), so that a long uncached prompt is cheaper prefilled
// remotely plus the transfer, a short one under pd_min_uncached_tokens
// (512) is prefilled locally.
const (
	prefillTPS = 20000
	decodeTPS  = 2000
)

// deployment is one disaggregated deployment: a prefill engine and a
// decode engine behind its sidecar.
type deployment struct {
	name     string
	pre, dec *Engine
	side     *Sidecar
}

// startDeployment starts deployment name of pool llama: engines reporting
// to the router over sc's connection.
func startDeployment(t *testing.T, sc *servertest.Sidecar, name string) *deployment {
	t.Helper()
	d := &deployment{name: name}
	var err error
	if d.pre, err = StartEngine(sc.Conn, "llama", name, name+"-prefill", "prefill", prefillTPS, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, d.pre.Close) })
	if d.side, err = ListenSidecar(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, d.side.Close) })
	if d.dec, err = StartEngine(sc.Conn, "llama", name, name+"-decode", "decode", decodeTPS, d.side.Addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOK(t, d.dec.Close) })
	d.side.Serve(d.dec.Addr)
	return d
}

// routed is what the gateway learned from /v1/route and what the request
// then got.
type routed struct {
	status      int
	dest, pre   string // x-gateway-destination-endpoint, x-prefiller-host-port
	deployment  string
	errBody     string
	answer      string // the completion's text
	answerState int
}

// route plays the gateway (nginx's auth_request): asks /v1/route for the
// prompt, then sends the request to the destination with the prefill
// header, as a gateway's proxy_set_header would.
func route(t *testing.T, sc *servertest.Sidecar, prompt string) routed {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "llama", "prompt": prompt, "max_tokens": 16, "stream": false})
	req, _ := http.NewRequest(http.MethodPost, "http://"+sc.HTTPAddr()+"/v1/route", strings.NewReader(string(body)))
	req.Header.Set("X-Original-URI", "/v1/completions")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := routed{status: resp.StatusCode, dest: resp.Header.Get("x-gateway-destination-endpoint"),
		pre: resp.Header.Get(PrefillerHeader), deployment: resp.Header.Get("x-prefixroute-deployment"), errBody: string(b)}
	if r.status != http.StatusNoContent {
		return r
	}
	dest, _, _ := strings.Cut(r.dest, ",")
	up, _ := http.NewRequest(http.MethodPost, "http://"+dest+"/v1/completions", strings.NewReader(string(body)))
	up.Header.Set("Content-Type", "application/json")
	if r.pre != "" {
		up.Header.Set(PrefillerHeader, r.pre)
	}
	ur, err := http.DefaultClient.Do(up)
	if err != nil {
		t.Fatal(err)
	}
	defer ur.Body.Close()
	r.answerState = ur.StatusCode
	var out struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	if json.NewDecoder(ur.Body).Decode(&out) == nil && len(out.Choices) > 0 {
		r.answer = out.Choices[0].Text
	}
	return r
}

// long is a prompt of about 3,000 tokens (12 KB, 187 blocks) starting
// with tag, so that prompts with different tags share no block.
func long(tag string) string {
	return tag + strings.Repeat(" the same long document, uncached where it was not seen;", 220)
}

// waitInstances waits until the pool lists want instances with state.
func waitInstances(t *testing.T, sc *servertest.Sidecar, want int, state pb.InstanceState) {
	t.Helper()
	testwait.Eventually(t, fmt.Sprintf("%d instances %v", want, state), func() bool {
		resp, err := sc.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: "llama"})
		if err != nil {
			return false
		}
		n := 0
		for _, in := range resp.GetInstances() {
			if in.GetState() == state {
				n++
			}
		}
		return n == want
	})
}

// closeOK reports a failed Close as a test error.
func closeOK(t *testing.T, close func() error) {
	if err := close(); err != nil {
		t.Error(err)
	}
}
