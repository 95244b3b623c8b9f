package httproute_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestUnauthenticatedOrigin: without a tokens file, /v1/pick and /v1/route
// answer only a loopback Host (a DNS-rebinding page's Host is refused) and
// no cross-site browser request (Origin, Sec-Fetch-Site); a client that is
// not a browser, on loopback, is served.
func TestUnauthenticatedOrigin(t *testing.T) {
	e := servertest.Start(t)
	for _, path := range []string{httproute.PathPick, httproute.PathRoute, httproute.PathOutcome} {
		for _, tc := range []struct {
			name      string
			hdr       map[string]string
			forbidden bool
		}{
			{"loopback, no browser", nil, false},
			{"localhost Host", map[string]string{"Host": "localhost"}, false},
			{"same origin", map[string]string{"Origin": "http://" + e.HTTPAddr(), "Sec-Fetch-Site": "same-origin"}, false},
			{"rebinding Host", map[string]string{"Host": "evil.example:9090"}, true},
			{"cross-site Origin", map[string]string{"Origin": "http://127.0.0.2:18080"}, true},
			{"null Origin", map[string]string{"Origin": "null"}, true},
			{"other scheme", map[string]string{"Origin": "https://" + e.HTTPAddr()}, true},
			{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
			{"same-site fetch", map[string]string{"Sec-Fetch-Site": "same-site"}, true},
		} {
			body := `{"pool":"m","prompt_tokens":64}`
			switch path {
			case httproute.PathRoute:
				body = `{"model":"m","prompt":"hi"}`
			case httproute.PathOutcome:
				body = `{"outcomes":[{"pool":"m","instance_id":"a","status":"OUTCOME_STATUS_SERVED"}]}`
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+e.HTTPAddr()+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set(httproute.OriginalURIHeader, "/v1/completions")
			for k, v := range tc.hdr {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := resp.StatusCode == http.StatusForbidden; got != tc.forbidden {
				t.Errorf("%s %s: %d %s, want forbidden %v", path, tc.name, resp.StatusCode, b, tc.forbidden)
			}
		}
	}
}
