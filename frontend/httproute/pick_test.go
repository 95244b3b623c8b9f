package httproute_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// httpAnswer is one response of the HTTP listener, read whole.
type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to the daemon's HTTP listener at path (with query) and
// reads the answer.
func post(t testing.TB, d *daemon.Daemon, path, body string, header http.Header) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+d.HTTPAddr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpAnswer{resp.StatusCode, resp.Header, b}
}

// rpcStatus is the JSON error body of /v1/pick: a google.rpc.Status.
type rpcStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// TestHTTPPickMatchesGRPC: /v1/pick decides exactly as a gRPC Pick does for
// the same request and seed, in protobuf JSON both ways (64-bit integers
// as strings), and is counted in the same metrics. (Two pools in the same
// state: a pick leaves its prefix on the chosen instance, so a second
// pick in the same pool would see it.)
func TestHTTPPickMatchesGRPC(t *testing.T) {
	e := servertest.Start(t)
	for _, pool := range []string{"chat", "twin"} {
		report(e, rep(pool, "a", "a-1"))
		report(e, rep(pool, "b", "b-1"))
	}
	hashes := []uint64{1 << 63, 42, 7}
	seed := uint64(1)<<60 + 3
	want, err := e.Pick.Pick(ctx(t), &pb.PickRequest{Pool: "chat", PrefixHashes: hashes, PromptTokens: 300, Seed: &seed, RequestId: "r-1"})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"pool":"twin","prefixHashes":["9223372036854775808","42","7"],"promptTokens":300,"seed":"1152921504606846979","requestId":"r-1"}`
	a := post(t, e.D, "/v1/pick", body, nil)
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q: %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	var got pb.PickResponse
	if err := protojson.Unmarshal(a.body, &got); err != nil {
		t.Fatalf("response %s: %v", a.body, err)
	}
	if !proto.Equal(&got, want) {
		t.Errorf("HTTP pick\n%v\nwant the gRPC pick's\n%v", &got, want)
	}
	if !bytes.Contains(a.body, []byte(`"seed":"1152921504606846979"`)) {
		t.Errorf("the seed is not a JSON string: %s", a.body)
	}
	fams := e.Metrics()
	for _, pool := range []string{"chat", "twin"} {
		labels := map[string]string{"pool": pool, "deployment": want.GetDeployment(), "outcome": "ok"}
		if n, _ := servertest.MetricValue(fams, "prefixroute_picks_total", labels); n != 1 {
			t.Errorf("prefixroute_picks_total%v %v, want 1", labels, n)
		}
	}
}

// TestHTTPPickErrors: every bad request gets the gRPC code's HTTP status
// and the status as JSON, naming what was wrong.
func TestHTTPPickErrors(t *testing.T) {
	e := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.MaxRecvMsgBytes = 1024 }))
	report(e, rep("chat", "a", "a-1"))
	for _, tc := range []struct {
		name, body string
		status     int
		code       int // gRPC code
		msg        string
	}{
		{"not JSON", `{"pool":`, 400, 3, "body is not a PickRequest in protobuf JSON"},
		{"unknown field", `{"pool":"chat","prompt":"hi"}`, 400, 3, `unknown field "prompt"`},
		{"hash not a number", `{"pool":"chat","prefixHashes":["x"]}`, 400, 3, "body is not a PickRequest"},
		{"no pool", `{}`, 400, 3, "pool is empty"},
		{"unknown pool", `{"pool":"nope"}`, 404, 5, "nope"},
		{"over the body limit", `{"pool":"chat","requestId":"` + strings.Repeat("x", 1024) + `"}`, 413, 8,
			"request body too large: 1054 bytes; the limit is 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, e.D, "/v1/pick", tc.body, nil)
			var st rpcStatus
			if err := json.Unmarshal(a.body, &st); err != nil {
				t.Fatalf("status %d, body %q: %v", a.status, a.body, err)
			}
			if a.status != tc.status || st.Code != tc.code || !strings.Contains(st.Message, tc.msg) {
				t.Fatalf("status %d %+v, want %d code %d mentioning %q", a.status, st, tc.status, tc.code, tc.msg)
			}
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
		})
	}
	t.Run("at the limit", func(t *testing.T) {
		pad := func(n int) string { return `{"pool":"chat","requestId":"` + strings.Repeat("x", n-30) + `"}` }
		if a := post(t, e.D, "/v1/pick", pad(1024), nil); a.status != http.StatusOK {
			t.Errorf("body of 1024 bytes: %d %s", a.status, a.body)
		}
		if a := post(t, e.D, "/v1/pick", pad(1025), nil); a.status != http.StatusRequestEntityTooLarge {
			t.Errorf("body of 1025 bytes: %d %s", a.status, a.body)
		}
	})
	t.Run("chunked over the limit", func(t *testing.T) {
		// No Content-Length: the limit cuts the read.
		r, w := io.Pipe()
		go func() {
			// The server stops reading at the limit: the write's error
			// is that closed pipe, and it is the point.
			_, err := w.Write([]byte(`{"pool":"chat","requestId":"` + strings.Repeat("y", 2048) + `"}`))
			_ = w.CloseWithError(err)
		}()
		resp, err := http.Post("http://"+e.D.HTTPAddr()+"/v1/pick", "application/json", r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st rpcStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatalf("error body is not JSON: %v", err)
		}
		if resp.StatusCode != 413 || st.Code != 8 || st.Message != "request body too large: over the limit of 1024 bytes" {
			t.Fatalf("status %d %+v", resp.StatusCode, st)
		}
	})
	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get("http://" + e.D.HTTPAddr() + "/v1/pick")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("GET /v1/pick: %d", resp.StatusCode)
		}
	})
}

// TestHTTPPickDecisionLog: an HTTP pick is in the decision log as a gRPC
// one is.
func TestHTTPPickDecisionLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	e := servertest.Start(t, servertest.Config(func(c *daemon.Config) { c.DecisionLog, c.DecisionLogRate = path, 1 }))
	report(e, rep("chat", "a", "a-1"))
	if a := post(t, e.D, "/v1/pick", `{"pool":"chat","requestId":"http-7","seed":"5"}`, nil); a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	e.Stop()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // opened for reading
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"http-7"`) {
		t.Fatalf("decision log %q, want one line of request http-7", lines)
	}
}
