package nginx

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestNginxReportsFailedConnect: an instance whose server is gone while
// its reporter still says ok (a crashed model server under a live agent)
// costs one failed connect through the real nginx: prefixroute.js reports
// the failed try (POST /v1/outcome, connect_failed) before the retry, and
// the sidecar picks the instance no more (excluded_reason unreachable)
// until its back-off ends. Without the report every request the sidecar
// sent to the instance holding the shared prompt paid a failed connect.
func TestNginxReportsFailedConnect(t *testing.T) {
	var deadAddr string
	f := startFleet(t, func(line string) bool {
		return deadAddr != "" && strings.Contains(line, "(111: Connection refused) while connecting to upstream") &&
			strings.Contains(line, deadAddr)
	})
	ins := f.add("chat", "d", "i-1", "i-2", "i-3")
	holder := f.servedBy(chat("chat", systemPrompt, "question 0", false))
	x := ins[holder]
	f.waitHeld("chat", holder, chat("chat", systemPrompt, "question 1", false))
	deadAddr = x.addr
	_ = x.srv.Close() // the server is gone; its reporter goes on saying ok

	retried := 0
	for i := 1; i <= 20; i++ {
		if got := f.servedBy(chat("chat", systemPrompt, fmt.Sprintf("question %d", i), false)); got == holder {
			t.Fatalf("request %d served by %s, whose server is gone", i, got)
		}
		if l := f.accessLine(); strings.Contains(l, " : ") {
			if !strings.Contains(l, "upstream="+x.addr+" : ") {
				t.Fatalf("access log %q: a retry, but not from %s (%s)", l, holder, x.addr)
			}
			retried++
		}
	}
	if retried != 1 {
		t.Errorf("%d requests paid a failed connect to %s, want 1 (the first, which reported it)", retried, holder)
	}
	for _, in := range f.pickAudit("chat", "").GetDecision().GetInstances() {
		if in.GetInstanceId() == holder && in.GetExcludedReason() != "unreachable" {
			t.Errorf("%s excluded for %q, want unreachable", holder, in.GetExcludedReason())
		}
	}
	if v, _ := servertest.MetricValue(f.sidecar.Metrics(), "prefixroute_outcomes_total",
		map[string]string{"pool": "chat", "status": "connect_failed"}); v != 1 {
		t.Errorf("prefixroute_outcomes_total{pool=chat,status=connect_failed} = %v, want 1", v)
	}
}
