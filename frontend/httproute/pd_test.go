package httproute_test

import (
	"net/http"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestRoutePrefiller: /v1/route answers a long uncached prompt with the
// decode instance as destination and the prefill instance in
// x-prefiller-host-port; a short prompt gets no prefill header.
func TestRoutePrefiller(t *testing.T) {
	e := servertest.Start(t)
	dec := rep("chat", "pd", "dec")
	dec.Role = pb.PdRole_PD_ROLE_DECODE
	q := 500.0
	dec.QueueMs = &q
	pre := rep("chat", "pd", "pre")
	pre.Role = pb.PdRole_PD_ROLE_PREFILL
	report(e, dec)
	report(e, pre)
	for _, tc := range []struct{ name, text, wantPre string }{
		{"long", strings.Repeat("a long uncached prompt ", 2000), "pre:8000"},
		{"short", "hello", ""},
	} {
		a := post(t, e.D, "/v1/route", chatBody("chat", tc.text), routeHeader("/v1/chat/completions"))
		if a.status != http.StatusNoContent {
			t.Fatalf("%s: status %d, body %q", tc.name, a.status, a.body)
		}
		if got := a.header.Get(gateway.DestinationHeader); got != "dec:8000" {
			t.Fatalf("%s: destination %q, want dec:8000", tc.name, got)
		}
		if got := a.header.Get(gateway.PrefillerHeader); got != tc.wantPre {
			t.Fatalf("%s: %s %q, want %q", tc.name, gateway.PrefillerHeader, got, tc.wantPre)
		}
		if want := map[bool]string{true: "pre", false: ""}[tc.wantPre != ""]; a.header.Get(gateway.PrefillInstanceHeader) != want {
			t.Fatalf("%s: %s %q, want %q", tc.name, gateway.PrefillInstanceHeader, a.header.Get(gateway.PrefillInstanceHeader), want)
		}
	}
}
