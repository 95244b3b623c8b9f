package nginx

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// Throughputs of the disaggregated pool's stand-ins, as internal/pdtest's:
// a prefill instance prefills at 20,000 tokens/s, a decode instance at
// 2,000 tokens/s, so that a long uncached prompt is cheaper prefilled
// remotely plus the transfer (2,100 tokens: ~116 ms against ~1,050 ms),
// and one under pd_min_uncached_tokens (512) is prefilled locally.
const (
	prefillTPS = 20000
	decodeTPS  = 2000
)

// spoofed are a client's own prefill headers: nginx must never pass them on.
var spoofed = map[string]string{
	gateway.PrefillerHeader:       "203.0.113.9:8000",
	gateway.PrefillInstanceHeader: "client-chosen",
}

// startPDFleet is a fleet of one disaggregated deployment d of pool pd:
// prefill instance p-1 and decode instances d-1, d-2, which are also
// nginx's static list (fail-open on).
func startPDFleet(t *testing.T, allowed func(string) bool) (*fleet, *standIn, map[string]*standIn) {
	t.Helper()
	return startPDFleetNamed(t, allowed, "p-1", [2]string{"d-1", "d-2"})
}

// startPDFleetNamed is startPDFleet with the instances' ids and nginx.conf
// edits of its own (startNginx's).
func startPDFleetNamed(t *testing.T, allowed func(string) bool, prefill string, decode [2]string, edits ...[2]string) (*fleet, *standIn, map[string]*standIn) {
	t.Helper()
	f := startSidecar(t)
	pre := newRoleStandIn(t, f.cc, "pd", "d", prefill, pb.PdRole_PD_ROLE_PREFILL, prefillTPS)
	dec := map[string]*standIn{}
	var list []string
	for _, name := range decode {
		dec[name] = newRoleStandIn(t, f.cc, "pd", "d", name, pb.PdRole_PD_ROLE_DECODE, decodeTPS)
		list = append(list, name+"="+dec[name].addr)
	}
	servertest.Eventually(t, fmt.Sprintf("the sidecar lists %s (prefill), %s and %s (decode) as reporting", prefill, decode[0], decode[1]), func() bool {
		resp, err := f.sidecar.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: "pd"})
		if err != nil {
			return false
		}
		ok := 0
		for _, in := range resp.GetInstances() {
			if in.GetState() == pb.InstanceState_INSTANCE_STATE_OK && in.GetRole() != pb.PdRole_PD_ROLE_UNSPECIFIED {
				ok++
			}
		}
		return ok == 3
	})
	f.nginx = startNginx(t, f.sidecar.HTTPAddr(), allowed,
		append([][2]string{{staticListLine, `default "` + strings.Join(list, " ") + `";`}}, edits...)...)
	return f, pre, dec
}

// wantPrefill fails unless a was served by a decode instance of dec that
// received exactly the prefill headers want (the prefill instance's
// address and id; none when want is nil), and the access log names the
// same prefill instance. It returns the instance that served a.
func wantPrefill(t *testing.T, f *fleet, dec map[string]*standIn, a answer, what string, want *standIn) *standIn {
	t.Helper()
	in := dec[a.header.Get("X-Served-By")]
	if a.status != http.StatusOK || in == nil {
		t.Fatalf("%s: %d %v %s; want 200 from a decode instance", what, a.status, a.header, a.body)
	}
	addr, id, prefill := []string(nil), []string(nil), "prefill= "
	if want != nil {
		addr, id, prefill = []string{want.addr}, []string{want.name}, "prefill="+want.name+" "
	}
	if got := in.received(gateway.PrefillerHeader); !slices.Equal(got, addr) {
		t.Errorf("%s: %s received %s %q, want %q", what, in.name, gateway.PrefillerHeader, got, addr)
	}
	if got := in.received(gateway.PrefillInstanceHeader); !slices.Equal(got, id) {
		t.Errorf("%s: %s received %s %q, want %q", what, in.name, gateway.PrefillInstanceHeader, got, id)
	}
	if l := f.accessLine(); !strings.Contains(l, " "+prefill) {
		t.Errorf("%s: access log %q, want %q", what, l, prefill)
	}
	return in
}

// TestNginxPassesThePrefillChoice: through the real nginx, a pick the
// sidecar disaggregates reaches the decode instance with
// x-prefiller-host-port (the prefill instance's address) and
// x-prefixroute-prefill-instance, the client's own values replaced; a
// local prefill (a short prompt, a cached one) and a request that failed
// open reach it with neither, the client's removed. A decode instance
// whose connection fails is reported (connect_failed) and the retry on
// the fallback decode instance carries the same prefill instance, which
// the failed try does not blame: the next long prompt still goes to it.
// Before nginx.conf set the headers, the decode instance got the
// client's values and never the sidecar's.
func TestNginxPassesThePrefillChoice(t *testing.T) {
	var deadAddr string
	sidecarDown := false
	f, pre, dec := startPDFleet(t, func(line string) bool {
		return strings.Contains(line, "(111: Connection refused) while connecting to upstream") &&
			(deadAddr != "" && strings.Contains(line, deadAddr) || sidecarDown && strings.Contains(line, "/v1/route"))
	})

	// A long uncached prompt: disaggregated.
	long := chat("pd", systemPrompt, "question 0", false)
	holder := wantPrefill(t, f, dec, f.sendWith(long, spoofed), "long uncached prompt", pre)
	// A short prompt: below pd_min_uncached_tokens, prefilled locally.
	wantPrefill(t, f, dec, f.sendWith(chat("pd", "", "hello", false), spoofed), "short prompt", nil)
	// The long prompt again, once its blocks are held: prefilled locally
	// on the instance holding them.
	f.waitHeld("pd", holder.name, long)
	if in := wantPrefill(t, f, dec, f.sendWith(long, spoofed), "long prompt, cached", nil); in != holder {
		t.Fatalf("the cached long prompt went to %s, not %s which holds it", in.name, holder.name)
	}

	// The holder's server dies while its reporter says ok: the sidecar
	// still names it for a prompt sharing the system prompt, with a long
	// uncached question (disaggregated); the connection fails, nginx
	// reports it and retries on the other decode instance with the same
	// prefill instance.
	deadAddr = holder.addr
	_ = holder.srv.Close()                                                                // the server is gone; its reporter goes on saying ok
	question := strings.Repeat("Summarize the attached quarterly report in detail. ", 80) // 4,080 bytes: ~1,000 uncached tokens
	other := wantPrefill(t, f, dec, f.sendWith(chat("pd", systemPrompt, question, false), spoofed), "retry after a failed connect", pre)
	if l := f.accessLine(); other == holder || !strings.Contains(l, "upstream="+holder.addr+" : "+other.addr+" ") {
		t.Fatalf("access log %q: want %s (%s) tried, then %s", l, holder.name, holder.addr, other.name)
	}
	if v, _ := servertest.MetricValue(f.sidecar.Metrics(), "prefixroute_outcomes_total",
		map[string]string{"pool": "pd", "status": "connect_failed"}); v != 1 {
		t.Errorf("prefixroute_outcomes_total{pool=pd,status=connect_failed} = %v, want 1 (the decode instance)", v)
	}
	for _, in := range f.pickAudit("pd", "").GetDecision().GetInstances() {
		switch in.GetInstanceId() {
		case holder.name:
			if in.GetExcludedReason() != "unreachable" {
				t.Errorf("%s excluded for %q, want unreachable", holder.name, in.GetExcludedReason())
			}
		case pre.name:
			if in.GetExcludedReason() == "unreachable" {
				t.Errorf("%s, the prefill instance, excluded as unreachable after the decode instance's failed connect", pre.name)
			}
		}
	}
	// The prefill instance still takes the next long uncached prompt.
	wantPrefill(t, f, dec, f.sendWith(chat("pd", "", "A new document. "+question, false), spoofed), "long prompt after the failed connect", pre)

	// Fail-open: the sidecar stopped, the static list serves without a
	// prefill instance, and the client's headers are still removed.
	sidecarDown = true
	f.sidecar.Stop()
	a := f.sendWith(long, spoofed)
	if a.header.Get(fallbackHeader) != "static" {
		t.Fatalf("sidecar down: %d %v %s, want a static fallback", a.status, a.header, a.body)
	}
	wantPrefill(t, f, dec, a, "failed open", nil)
	if n := pre.served.Load(); n != 0 {
		t.Errorf("the prefill instance served %d requests through nginx, want 0", n)
	}
	t.Logf("prefill instance %s; decode instances served %s %d, %s %d", pre.addr,
		dec["d-1"].name, dec["d-1"].served.Load(), dec["d-2"].name, dec["d-2"].served.Load())
}
