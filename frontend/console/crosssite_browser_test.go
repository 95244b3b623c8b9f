package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// crossSitePage is a page of another origin that tries what the review's
// F6 did: cross-site "simple" POSTs (text/plain, no preflight) to the
// sidecar's /v1/pick and /v1/route, five of each, then sets its title.
const crossSitePage = `<!doctype html><title>running</title><script>
(async () => {
  const side = %q;
  for (let i = 0; i < 5; i++) {
    for (const [path, extra] of [["/v1/pick", {}], ["/v1/route", {"x-original-uri": "/v1/chat/completions"}]]) {
      try {
        await fetch(side + path, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
          body: path === "/v1/pick" ? '{"pool":"chat"}' : '{"model":"chat","messages":[{"role":"user","content":"hi"}]}'});
      } catch (e) {}
    }
  }
  document.title = "done";
})();
</script>`

// TestCrossSitePicksRefusedInBrowser is issue 32's F6 in a real browser:
// without a tokens file, a page of another origin makes Chromium send
// cross-site POSTs to /v1/pick and /v1/route; the sidecar refuses every
// one (its Origin is not this listener's), so no pick is made, while a
// same-origin call (no Origin, as nginx and Go clients send) still picks.
func TestCrossSitePicksRefusedInBrowser(t *testing.T) {
	sc := servertest.Start(t, servertest.RealClock())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := sc.Load.ReportLoad(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "a-1", Address: "10.0.0.1:8000",
		Seq: 1, PrefillTokensPerSecond: 10000, KvCapacityBlocks: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("first report's ack: %v", err)
	}
	side := "http://" + sc.HTTPAddr()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, crossSitePage, side)
	}))
	t.Cleanup(evil.Close)

	b := newBrowser(t, sc.HTTPAddr())
	b.run(chromedp.Navigate(evil.URL))
	b.waitJS(`document.title === "done"`)

	// The control: a same-origin pick is made and counted. Chromium may take
	// longer to start than an instance stays fresh on a loaded machine: the
	// instance reports again first.
	if err := st.Send(&pb.ReportLoadRequest{Seq: 2, PrefillTokensPerSecond: 10000, KvCapacityBlocks: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("second report's ack: %v", err)
	}
	resp, err := http.Post(side+httproute.PathPick, "application/json", strings.NewReader(`{"pool":"chat"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("same-origin /v1/pick: %s %s", resp.Status, body)
	}
	var picks float64
	for _, m := range sc.Metrics()["prefixroute_picks_total"].GetMetric() {
		picks += m.GetCounter().GetValue()
	}
	if picks != 1 {
		t.Fatalf("%v picks made, want 1 (the same-origin control): the cross-site POSTs were served", picks)
	}
}
