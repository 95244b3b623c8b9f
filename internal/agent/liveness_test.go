package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/prefixroute/prefixroute/internal/enginemetrics"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// get serves one GET through h and returns the status and body.
func get(h http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

// TestLivezAndSilentKVEvents runs a real agent against a live engine
// metrics page, a router address nothing listens on and a KV events
// endpoint with no publisher: /healthz is 503 (router unreachable) while
// /livez is 200; after KVEventsSilentAfter the agent logs a WARN naming
// the endpoint, prefixagent_kv_events_silent is 1 and /status says so.
// When Run returns, /livez is 503.
func TestLivezAndSilentKVEvents(t *testing.T) {
	page, err := os.ReadFile("../enginemetrics/testdata/vllm.metrics")
	if err != nil {
		t.Fatal(err)
	}
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(page) }))
	defer engine.Close()
	cc, err := client.Dial(fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	endpoint := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	var logs testwait.SyncBuffer
	a, err := New(cc, Config{Engine: enginemetrics.VLLM, MetricsURL: engine.URL, Pool: pool, Deployment: "A",
		InstanceID: "gpu-0", Address: "10.0.0.1:8000", KVEvents: endpoint, KVEventsSilentAfter: 300 * time.Millisecond,
		ReporterMinBackoff: 10 * time.Millisecond, ReporterMaxBackoff: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Handler()
	if code, body := get(h, "/livez"); code != http.StatusServiceUnavailable || !strings.Contains(body, "gpu-0: not running") {
		t.Fatalf("/livez before Run: %d %s", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	testwait.Eventually(t, "the engine scraped", a.engineUp)
	if code, body := get(h, "/livez"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/livez with the router unreachable: %d %s", code, body)
	}
	if code, body := get(h, "/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not connected") {
		t.Errorf("/healthz with the router unreachable: %d %s", code, body)
	}
	testwait.Eventually(t, "the silence warning", func() bool { return testutil.ToFloat64(a.m.kvSilent) == 1 })
	// The gauge is set a moment before the line is logged: wait for it.
	want := `level=WARN msg="prefixagent: no KV event message received;`
	testwait.EventuallyOK(t, func() string {
		if l := logs.String(); !strings.Contains(l, want) || !strings.Contains(l, "endpoint="+endpoint) {
			return fmt.Sprintf("log lacks %q with endpoint=%s:\n%s", want, endpoint, l)
		}
		return ""
	})
	code, body := get(h, "/status")
	var st struct{ Agents []Status }
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil || len(st.Agents) != 1 {
		t.Fatalf("/status: %d %v %s", code, err, body)
	}
	s := st.Agents[0]
	if !s.KVEventsSilent || s.KVEventsSeen || !s.Live || s.KVEvents != endpoint ||
		!strings.Contains(strings.Join(s.Problems, "; "), "no KV event message from "+endpoint+" in the 300ms since start") {
		t.Errorf("/status: %+v", s)
	}
	if code, body := get(h, "/healthz"); code != http.StatusServiceUnavailable || strings.Contains(body, "KV") {
		t.Errorf("/healthz keeps its meaning (engine, router), got %d %s", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if code, _ := get(h, "/livez"); code != http.StatusServiceUnavailable {
		t.Errorf("/livez after Run returned: %d", code)
	}
}

// TestKVEventsNotSilent: a message before KVEventsSilentAfter keeps the
// warning off, and one after it ends the warning.
func TestKVEventsNotSilent(t *testing.T) {
	a := &Agent{cfg: Config{KVEvents: "tcp://127.0.0.1:5557", KVEventsSilentAfter: time.Nanosecond}, log: quiet, m: newMetrics(nil)}
	a.kvReceived()
	a.watchSilence(context.Background())
	if testutil.ToFloat64(a.m.kvSilent) != 0 || a.Status().KVEventsSilent {
		t.Fatalf("silent after a message")
	}
	b := &Agent{cfg: a.cfg, log: quiet, m: newMetrics(nil)}
	b.watchSilence(context.Background())
	if testutil.ToFloat64(b.m.kvSilent) != 1 {
		t.Fatalf("not silent without a message")
	}
	b.kvReceived()
	if testutil.ToFloat64(b.m.kvSilent) != 0 || b.Status().KVEventsSilent || !b.Status().KVEventsSeen {
		t.Fatalf("still silent after a message: %+v", b.Status())
	}
}
