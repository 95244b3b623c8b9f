package extproc_test

import (
	"context"
	"testing"

	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/testwait"
)

// TestBodyBudget: with a daemon-wide budget of 8 KiB of buffered body
// bytes, a stream holding 5 KiB leaves no room for another 5 KiB body,
// which is answered 503 body_budget naming the limit, in either body mode;
// the held bytes come back when the holding stream is cancelled, and after
// a request that was decided or refused, so the next request is served.
func TestBodyBudget(t *testing.T) {
	budget := gateway.NewBodyBudget(8 << 10)
	e := start(t, extproc.Options{Gateway: gateway.Config{MaxBodyBytes: 6 << 10, BodyBudget: budget}})
	e.instance("llama", "blue", "b1", "10.0.0.1:8000", 0)
	body := chatBody("llama", 5<<10, 1)
	request := func(mode procmode.ProcessingMode_BodySendMode, body []byte, chunk int) []*extprocv3.ProcessingRequest {
		return append([]*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, mode)}, chunked(body, chunk)...)
	}

	// A stream that sends its headers and most of its body, then waits.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold, err := e.ext.Process(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send(t, hold, request(duplex, body, 1<<20)[0], reqBody(body[:5<<10], false))
	testwait.Eventually(t, "the held body charged", func() bool { return budget.Used() >= 5<<10 })

	for _, tt := range []struct {
		name string
		msgs []*extprocv3.ProcessingRequest
	}{
		{"duplex, in chunks", request(duplex, body, 1<<10)},
		{"buffered, whole", request(buffered, body, 1<<20)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := e.exchange(context.Background(), tt.msgs...)
			if err != nil {
				t.Fatal(err)
			}
			checkImmediate(t, rs, 503, gateway.ReasonBodyBudget, "limit of 8192 buffered body bytes")
		})
	}
	if got := budget.Used(); got != 5<<10 {
		t.Errorf("%d bytes charged after the refusals, want the held stream's %d", got, 5<<10)
	}

	cancel() // the holding stream ends without its body's end
	testwait.Eventually(t, "the cancelled stream's bytes given back", func() bool { return budget.Used() == 0 })

	rs, err := e.exchange(context.Background(), request(duplex, body, 1<<10)...)
	if err != nil {
		t.Fatal(err)
	}
	if d := decisionOf(t, rs); d.header != "10.0.0.1:8000" {
		t.Errorf("routed to %q after the budget was given back", d.header)
	}
	rs, err = e.exchange(context.Background(), request(buffered, []byte(`{"model":"llama"}`), 1<<20)...)
	if err != nil {
		t.Fatal(err)
	}
	checkImmediate(t, rs, 400, gateway.ReasonBadRequest, "messages")
	testwait.Eventually(t, "every byte given back", func() bool { return budget.Used() == 0 })
}
