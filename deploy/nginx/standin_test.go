package nginx

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// standIn is an OpenAI-compatible model server on loopback: it answers
// /v1/chat/completions with its own name, as one JSON completion or, for
// "stream": true, as server-sent events in OpenAI's chunk format, and
// reports its load through a pkg/client Reporter with the cache events of
// what it served: the prefix blocks of each prompt, hashed as the
// sidecar's /v1/route hashes them (internal/gateway), as a model server
// with prefix caching would hold them. Safe for concurrent use.
type standIn struct {
	t          testing.TB
	pool, dep  string
	name, addr string
	lis        net.Listener
	srv        *http.Server
	rep        *client.Reporter
	mapper     *gateway.Mapper
	served     atomic.Int64
	hold       atomic.Bool // reports held: the sidecar will see it go stale
	// lastHeader is the header of the latest request it served (the
	// prefill test reads what nginx passed on).
	lastMu     sync.Mutex
	lastHeader http.Header
	// dieOnNext makes the next request kill the stand-in while it serves
	// it: it vanishes, closing that request's connection unanswered.
	dieOnNext atomic.Bool
	// gate, when set, is waited on between a stream's first event and
	// the rest (SSE test: the client must see the first event before the
	// stand-in sends more, which buffering anywhere would prevent).
	gateMu sync.Mutex
	gate   chan struct{}
	// frontend, when set, checks a request's header before it is served,
	// as an engine's own frontend would: an error is answered 500 with
	// the error's text as an OpenAI error (the Dynamo test).
	frontend atomic.Pointer[func(http.Header) error]
}

// newStandIn starts the stand-in of instance name (pool, deployment) and
// its reporter to the sidecar on cc: an aggregated instance (role both)
// prefilling 2,000 tokens/s.
func newStandIn(t testing.TB, cc grpc.ClientConnInterface, pool, dep, name string) *standIn {
	t.Helper()
	return newRoleStandIn(t, cc, pool, dep, name, pb.PdRole_PD_ROLE_UNSPECIFIED, 2000)
}

// newRoleStandIn is newStandIn with the role and prefill throughput
// (tokens/s) it reports.
func newRoleStandIn(t testing.TB, cc grpc.ClientConnInterface, pool, dep, name string, role pb.PdRole, tps float64) *standIn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := gateway.NewMapper(gateway.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &standIn{t: t, pool: pool, dep: dep, name: name, addr: lis.Addr().String(), lis: lis, mapper: m}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.srv.Serve(lis); err != nil && err != http.ErrServerClosed {
			t.Errorf("stand-in %s: %v", name, err)
		}
	}()
	s.rep, err = client.NewReporter(cc, client.ReporterOptions{
		Pool: pool, Deployment: dep, InstanceID: name, Address: s.addr, CacheEvents: true,
		Load: func() client.Load {
			return client.Load{Role: role, PrefillTokensPerSecond: tps, KVCapacityBlocks: 100000}
		},
		Hold:   s.hold.Load,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

// kill stops answering (the listener closes: connections are refused)
// and ends the reporter's stream.
func (s *standIn) kill() {
	_ = s.srv.Close() // refusing connections is the point; its error is the listener's, already closed
	if err := s.rep.Close(); err != nil {
		s.t.Errorf("stand-in %s: Reporter.Close: %v", s.name, err)
	}
}

// vanish stops answering and stops reporting without ending the stream,
// as a host that froze or dropped off the network: the sidecar only learns
// it from the reports' absence (stale_after).
func (s *standIn) vanish() {
	s.hold.Store(true)
	_ = s.srv.Close() // as in kill
}

// received is every value of header name in the latest request the
// stand-in served (none when it was absent).
func (s *standIn) received(name string) []string {
	s.lastMu.Lock()
	defer s.lastMu.Unlock()
	return s.lastHeader.Values(name)
}

// setGate makes every stream wait for g after its first event.
func (s *standIn) setGate(g chan struct{}) {
	s.gateMu.Lock()
	s.gate = g
	s.gateMu.Unlock()
}

// chatRequest is the part of a chat completion request the stand-in reads.
type chatRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
}

// Reply is what the stand-in answers a non-streamed request with (and
// what the test decodes): an OpenAI chat completion naming the instance.
type Reply struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Instance string `json:"instance"` // the stand-in's own field
}

// sseEvents are the events of a streamed answer by instance name: a role
// chunk, content chunks, a finish chunk, then [DONE].
func sseEvents(name string) []string {
	chunk := func(delta, finish string) string {
		return fmt.Sprintf(`data: {"id":"chatcmpl-%s","object":"chat.completion.chunk","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n",
			name, delta, finish)
	}
	return []string{
		chunk(`{"role":"assistant"}`, "null"),
		chunk(`{"content":"served "}`, "null"),
		chunk(`{"content":"by "}`, "null"),
		chunk(`{"content":"`+name+`"}`, "null"),
		chunk(`{}`, `"stop"`),
		"data: [DONE]\n\n",
	}
}

func (s *standIn) complete(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, `{"error":{"message":"bad body","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	if s.dieOnNext.CompareAndSwap(true, false) {
		s.vanish() // closes this connection too, before any answer
		return
	}
	s.lastMu.Lock()
	s.lastHeader = r.Header.Clone()
	s.lastMu.Unlock()
	if check := s.frontend.Load(); check != nil {
		if err := (*check)(r.Header); err != nil {
			msg, _ := json.Marshal(err.Error())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"error":{"message":%s,"type":"internal_server_error"}}`, msg)
			return
		}
	}
	s.served.Add(1)
	var pr pb.PickRequest
	if err := s.mapper.Map(gateway.Request{Path: r.URL.Path, Body: body}, &pr); err == nil {
		s.rep.Stored(pr.GetPrefixHashes()...)
		s.rep.Flush()
	}
	w.Header().Set("X-Served-By", s.name)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-%s","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"served by %s"},"finish_reason":"stop"}],"instance":%q}`,
			s.name, req.Model, s.name, s.name)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl := w.(http.Flusher)
	s.gateMu.Lock()
	gate := s.gate
	s.gateMu.Unlock()
	for i, ev := range sseEvents(s.name) {
		if _, err := io.WriteString(w, ev); err != nil {
			return // the client (nginx) is gone
		}
		fl.Flush()
		if i == 0 && gate != nil {
			select {
			case <-gate:
			case <-time.After(servertest.DefaultTimeout):
				_, _ = io.WriteString(w, "data: the client never saw the first event: the stream was buffered\n\n") // the test reads this as its failure
				return
			}
		}
	}
}
