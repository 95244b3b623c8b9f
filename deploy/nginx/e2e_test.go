package nginx

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestNginxSharedPrefixStaysOnItsInstance: requests sharing a long system
// prompt, sent through nginx, all land on the instance that served (and
// so holds) it first.
func TestNginxSharedPrefixStaysOnItsInstance(t *testing.T) {
	f := startFleet(t, nil)
	ins := f.add("chat", "d", "i-1", "i-2", "i-3")
	first := f.servedBy(chat("chat", systemPrompt, "question 0", false))
	blocks := f.waitHeld("chat", first, chat("chat", systemPrompt, "question 1", false)) // its cache events arrived
	t.Logf("%s holds the system prompt's %d blocks", first, blocks)
	for i := 1; i <= 20; i++ {
		if got := f.servedBy(chat("chat", systemPrompt, fmt.Sprintf("question %d", i), false)); got != first {
			li, _ := f.sidecar.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: "chat"})
			t.Fatalf("request %d sharing the system prompt went to %s, not %s which holds it; instances now: %v",
				i, got, first, li.GetInstances())
		}
	}
	if n := ins[first].served.Load(); n != 21 {
		t.Errorf("%s served %d requests, want 21", first, n)
	}
}

// TestNginxWeightsShiftNewPrompts: with weights a:1 b:9, prompts sharing
// nothing go to a about one time in ten. 400 requests: a's count is
// Binomial(400, 0.1), mean 40, sd 6; the bounds [16, 70] are 4 and 5 sd
// away (a false failure about once in 30,000 runs).
func TestNginxWeightsShiftNewPrompts(t *testing.T) {
	f := startFleet(t, nil)
	f.add("mix", "a", "a-1")
	f.add("mix", "b", "b-1")
	if _, err := f.sidecar.Admin.SetWeights(context.Background(), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "mix",
		Weights: map[string]float64{"a": 1, "b": 9}}); err != nil {
		t.Fatal(err)
	}
	// The probability the sidecar reports for a new prompt is the weight's.
	r := f.route(chat("mix", "", "probe: a prompt that shares nothing with the others, long enough for a block", false))
	want := map[string]string{"a-1": "0.1", "b-1": "0.9"}[r.header.Get(httproute.InstanceHeader)]
	if r.status != http.StatusNoContent || r.header.Get(httproute.ProbabilityHeader) != want {
		t.Fatalf("/v1/route: %d %v", r.status, r.header)
	}
	const n = 400
	count := map[string]int{}
	for i := range n {
		count[f.servedBy(chat("mix", "", fmt.Sprintf("prompt %d: a question that shares no block with any other one", i), false))]++
	}
	if count["a-1"] < 16 || count["a-1"] > 70 || count["a-1"]+count["b-1"] != n {
		t.Fatalf("served %v of %d, want a-1 about 40 (16..70)", count, n)
	}
	t.Logf("weights 1:9 over %d new prompts: a-1 %d (%.1f%%), b-1 %d", n, count["a-1"], 100*float64(count["a-1"])/n, count["b-1"])
}

// TestNginxDeadInstance: an instance that dies serving a request (it
// stops answering and reporting, its stream still open, as a host that
// froze) fails that request unanswered, and nginx sends it to the
// fallback the sidecar listed; the sidecar still chooses the instance
// until its reports are stale_after old, and nginx's refused connections
// go to the fallback too, so every client request succeeds; once stale
// the sidecar names it no more. An instance whose stream ends (killed
// with its reporter) is dropped at once.
func TestNginxDeadInstance(t *testing.T) {
	var gone []string
	f := startFleet(t, func(line string) bool {
		// nginx logs each failed connection to a dead instance, and the
		// request the instance died serving: expected.
		for _, addr := range gone {
			if (strings.Contains(line, "(111: Connection refused) while connecting to upstream") ||
				strings.Contains(line, "upstream prematurely closed connection while reading response header")) &&
				strings.Contains(line, addr) {
				return true
			}
		}
		return false
	})
	const stale = 3 * time.Second
	if _, err := f.sidecar.Admin.SetPolicy(context.Background(), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat",
		Policy: &pb.Policy{StaleAfter: durationpb.New(stale)}}); err != nil {
		t.Fatal(err)
	}
	ins := f.add("chat", "d", "i-1", "i-2", "i-3")
	holder := f.servedBy(chat("chat", systemPrompt, "question 0", false))
	x := ins[holder]
	gone = append(gone, x.addr)
	f.waitHeld("chat", holder, chat("chat", systemPrompt, "question 1", false))

	// x dies serving the next request: that request, in flight, goes to
	// the fallback.
	x.dieOnNext.Store(true)
	got := f.servedBy(chat("chat", systemPrompt, "question 1", false))
	vanished := time.Now()
	wantRetried(t, f, holder, x, ins[got])
	// Until stale_after the sidecar may still name x first (it shares the
	// prefix with the fallback that served question 1 now): nginx's
	// connection is refused and the request goes to the fallback.
	refused := 0
	for i := 2; refused == 0 && i < 40; i++ {
		got = f.servedBy(chat("chat", systemPrompt, fmt.Sprintf("question %d", i), false))
		if strings.Contains(f.accessLine(), "instance="+holder+" ") {
			wantRetried(t, f, holder, x, ins[got])
			refused++
		}
	}
	if refused == 0 {
		t.Fatalf("the sidecar never named %s in 38 requests before it went stale", holder)
	}
	// Within stale_after the sidecar stops naming x.
	servertest.Eventually(t, holder+" left out of /v1/route", func() bool {
		r := f.route(chat("chat", systemPrompt, "probe", false))
		return r.status == http.StatusNoContent && !strings.Contains(r.header.Get(gateway.DestinationHeader), x.addr)
	})
	took := time.Since(vanished)
	for _, in := range f.pickAudit("chat", "").GetDecision().GetInstances() {
		// unreachable: nginx reported the refused connection (ReportOutcome)
		// before the reports went stale_after old.
		if r := in.GetExcludedReason(); in.GetInstanceId() == holder && r != "stale" && r != "unreachable" {
			t.Errorf("%s excluded for %q, want unreachable or stale", holder, r)
		}
	}
	t.Logf("%s left out %v after it vanished (stale_after %v)", holder, took.Round(time.Millisecond), stale)
	before := x.served.Load()
	for i := range 10 {
		if got := f.servedBy(chat("chat", systemPrompt, fmt.Sprintf("after stale %d", i), false)); got == holder {
			t.Fatalf("served by %s, which is gone", got)
		}
		if l := f.accessLine(); strings.Contains(l, " : ") {
			t.Fatalf("access log %q: a retry after %s went stale", l, holder)
		}
	}
	if x.served.Load() != before {
		t.Errorf("%s served requests after it vanished", holder)
	}

	// Killed: its stream ends, the sidecar drops it at once.
	var killed *standIn
	for name, in := range ins {
		if name != holder {
			killed = in
			break
		}
	}
	gone = append(gone, killed.addr)
	killed.kill()
	servertest.Eventually(t, killed.name+" left out of /v1/route once killed", func() bool {
		r := f.route(chat("chat", "", "probe", false))
		return r.status == http.StatusNoContent && !strings.Contains(r.header.Get(gateway.DestinationHeader), killed.addr)
	})
	for i := range 10 {
		if got := f.servedBy(chat("chat", "", fmt.Sprintf("after the kill %d", i), false)); got == holder || got == killed.name {
			t.Fatalf("served by %s, which is gone", got)
		}
	}
}

// wantRetried fails unless the latest request through nginx was routed
// to x (the sidecar's choice, holder), failed there with 502 and was
// served by the fallback y.
func wantRetried(t *testing.T, f *fleet, holder string, x, y *standIn) {
	t.Helper()
	last := f.accessLine()
	if y == nil || y == x || !strings.Contains(last, "instance="+holder+" ") ||
		!strings.Contains(last, "upstream="+x.addr+" : "+y.addr+" ") || !strings.Contains(last, "upstream_status=502 : 200 ") {
		t.Fatalf("access log %q: want the request routed to %s (%s), failed there, then served by a fallback", last, holder, x.addr)
	}
}

// TestNginxStreamsSSE: a streamed answer passes through nginx byte for
// byte, and event by event: the stand-in sends the rest only once the
// client has read the first event, which any buffering would prevent.
func TestNginxStreamsSSE(t *testing.T) {
	f := startFleet(t, nil)
	ins := f.add("chat", "d", "i-1", "i-2")
	gate := make(chan struct{})
	for _, in := range ins {
		in.setGate(gate)
	}
	resp, err := f.nginx.post("/v1/chat/completions", chat("chat", "", "stream me a story", true))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	name := resp.Header.Get("X-Served-By")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || ins[name] == nil {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	want := sseEvents(name)
	br := bufio.NewReader(resp.Body)
	first, err := readEvent(br)
	if err != nil || first != want[0] {
		t.Fatalf("first event %q (%v), want %q", first, err, want[0])
	}
	close(gate)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if got := first + string(rest); got != strings.Join(want, "") {
		t.Fatalf("stream through nginx\n%q\nwant\n%q", got, strings.Join(want, ""))
	}
}

// readEvent reads one server-sent event, through its blank line.
func readEvent(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		sb.WriteString(line)
		if err != nil || line == "\n" {
			return sb.String(), err
		}
	}
}

// TestNginxAnswersTheSidecarsErrors: a request the sidecar finds no
// instance for gets the sidecar's answer through nginx, status, JSON body
// and reason; a body over the limit gets 413 in the same form; with the
// sidecar down nginx answers 503 itself.
func TestNginxAnswersTheSidecarsErrors(t *testing.T) {
	down := false
	f := startFleet(t, func(line string) bool {
		return strings.Contains(line, "client intended to send too large body") ||
			down && strings.Contains(line, "while connecting to upstream") && strings.Contains(line, "/v1/route")
	})
	f.add("chat", "d", "i-1")
	body := chat("no-such-model", "", "hello", false)
	direct := f.route(body)
	got := f.send(body)
	if got.status != http.StatusNotFound || got.status != direct.status || got.body != direct.body ||
		got.header.Get(gateway.ReasonHeader) != gateway.ReasonUnknownPool || got.header.Get("Content-Type") != "application/json" {
		t.Fatalf("through nginx %d %v %s; the sidecar answers %d %s", got.status, got.header, got.body, direct.status, direct.body)
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(got.body), &e); err != nil || e.Error.Code != gateway.ReasonUnknownPool ||
		!strings.Contains(e.Error.Message, "no-such-model") {
		t.Fatalf("body %s: %v", got.body, err)
	}

	// Over the body limit (nginx's, the same as the sidecar's): 413 in the
	// sidecar's form, without asking it.
	big := chat("chat", "", strings.Repeat("x", 16<<20), false)
	got = f.send(big)
	if err := json.Unmarshal([]byte(got.body), &e); err != nil || got.status != http.StatusRequestEntityTooLarge ||
		e.Error.Code != gateway.ReasonBodyTooLarge || got.header.Get(gateway.ReasonHeader) != gateway.ReasonBodyTooLarge {
		t.Fatalf("body of %d bytes: %d %v %s", len(big), got.status, got.header, got.body)
	}

	down = true
	f.sidecar.Stop()
	got = f.send(chat("chat", "", "hello", false))
	if err := json.Unmarshal([]byte(got.body), &e); err != nil || got.status != http.StatusServiceUnavailable ||
		e.Error.Code != "router_unavailable" || got.header.Get(gateway.ReasonHeader) != "router_unavailable" {
		t.Fatalf("sidecar down: %d %v %s", got.status, got.header, got.body)
	}
}
