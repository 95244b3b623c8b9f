package extproc_test

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestConcurrentStreams: 1,000 requests on concurrent streams are all
// routed, each gets its own body back, and the pick accounting counts
// each once (TestMain checks that no goroutine is left).
func TestConcurrentStreams(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2})
	threeDeployments(e)
	const n = 1000
	before := e.scrape()
	picks0 := counter(before, "prefixroute_picks_total", nil)
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := chatBody("llama", 2<<10, i)
			rs, err := e.exchange(context.Background(), append([]*extprocv3.ProcessingRequest{
				reqHeaders("POST", "/v1/chat/completions", false, duplex)}, chunked(body, 700)...)...)
			if err != nil {
				errs <- err.Error()
				return
			}
			for _, r := range rs {
				if ir := r.GetImmediateResponse(); ir != nil {
					errs <- "request " + strconv.Itoa(i) + ": immediate response " + string(ir.GetBody())
					return
				}
			}
			d := decisionOf(t, rs)
			if d.header == "" || d.header != d.metadata || !bytes.Equal(d.body, body) {
				errs <- "request " + strconv.Itoa(i) + ": destination " + d.header + " / " + d.metadata + ", body back equal: " + strconv.FormatBool(bytes.Equal(d.body, body))
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Error(msg)
	}
	fams := e.scrape()
	if got := counter(fams, "prefixroute_picks_total", nil) - picks0; got != n {
		t.Errorf("prefixroute_picks_total grew by %v, want %d", got, n)
	}
	if got := counter(fams, "prefixroute_extproc_requests_total", map[string]string{"result": "routed"}); got != n {
		t.Errorf("prefixroute_extproc_requests_total{result=routed} = %v, want %d", got, n)
	}
}

// TestClientHangsUpMidBody: a gateway that goes away in the middle of a
// body leaves no pick behind, and the processor keeps serving.
func TestClientHangsUpMidBody(t *testing.T) {
	e := start(t, extproc.Options{Fallbacks: 2})
	threeDeployments(e)
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := e.ext.Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		send(t, st, reqHeaders("POST", "/v1/chat/completions", false, duplex))
		send(t, st, reqBody(chatBody("llama", 100<<10, i)[:50<<10], false))
		cancel()
	}
	servertest.Never(t, "a pick for a request whose client hung up", 0, func() bool {
		return counter(e.scrape(), "prefixroute_picks_total", nil) != 0
	})
	rs, err := e.exchange(context.Background(), reqHeaders("POST", "/v1/chat/completions", false, duplex), reqBody(chatBody("llama", 100, 1), true))
	if err != nil {
		t.Fatal(err)
	}
	if d := decisionOf(t, rs); d.header == "" {
		t.Fatal("no decision after the hang-ups")
	}
	if got := counter(e.scrape(), "prefixroute_picks_total", nil); got != 1 {
		t.Fatalf("prefixroute_picks_total %v, want 1", got)
	}
}
