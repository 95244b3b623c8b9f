package nginx

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// fleet is one end-to-end setup: a real prefixrouted on loopback (wall
// clock), model-server stand-ins reporting to it, and a real nginx running
// deploy/nginx's configuration in front of them.
type fleet struct {
	t       *testing.T
	sidecar *servertest.Sidecar
	cc      *grpc.ClientConn // the stand-ins' connection to the sidecar
	nginx   *nginxProc
	reqs    int // requests sent through nginx, for their ids
}

// startFleet starts the sidecar and nginx; allowed lines of nginx's error
// log do not fail the test.
func startFleet(t *testing.T, allowed func(line string) bool) *fleet {
	t.Helper()
	f := startSidecar(t)
	f.nginx = startNginx(t, f.sidecar.HTTPAddr(), allowed)
	return f
}

// startSidecar starts the sidecar and the stand-ins' connection to it, not
// nginx (the caller starts it with its own configuration); it skips the
// test loudly when nginx is missing, before anything starts.
func startSidecar(t *testing.T) *fleet {
	t.Helper()
	nginxBinary(t)
	f := &fleet{t: t, sidecar: servertest.Start(t, servertest.RealClock())}
	var err error
	if f.cc, err = client.Dial(f.sidecar.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cc.Close() })
	return f
}

// add starts stand-ins of pool and deployment dep by name and waits until
// the sidecar lists them as reporting.
func (f *fleet) add(pool, dep string, names ...string) map[string]*standIn {
	f.t.Helper()
	out := map[string]*standIn{}
	for _, n := range names {
		out[n] = newStandIn(f.t, f.cc, pool, dep, n)
	}
	servertest.Eventually(f.t, fmt.Sprintf("the sidecar lists %v as reporting", names), func() bool {
		resp, err := f.sidecar.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: pool})
		if err != nil {
			return false
		}
		ok := 0
		for _, in := range resp.GetInstances() {
			if out[in.GetInstanceId()] != nil && in.GetState() == pb.InstanceState_INSTANCE_STATE_OK {
				ok++
			}
		}
		return ok == len(names)
	})
	return out
}

// answer is one response through nginx, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// send posts a chat completion body through nginx with a new
// x-request-id, which names the request in nginx's access log
// (accessLine).
func (f *fleet) send(body string) answer {
	f.t.Helper()
	return f.sendWith(body, nil)
}

// sendWith is send with the client's own headers hs as well.
func (f *fleet) sendWith(body string, hs map[string]string) answer {
	f.t.Helper()
	f.reqs++
	req, _ := http.NewRequest(http.MethodPost, f.nginx.url("/v1/chat/completions"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hs {
		req.Header.Set(k, v)
	}
	req.Header.Set("X-Request-Id", fmt.Sprintf("e2e-%d", f.reqs))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// accessLine is the access log line of the latest request send made. nginx
// writes it after the answer, so it may take a moment to appear.
func (f *fleet) accessLine() string {
	f.t.Helper()
	id := fmt.Sprintf("request_id=e2e-%d ", f.reqs)
	var line string
	servertest.Eventually(f.t, "the access log has "+id, func() bool {
		for _, l := range strings.Split(f.nginx.accessLog(), "\n") {
			if strings.Contains(l+" ", id) {
				line = l + " "
				return true
			}
		}
		return false
	})
	return line
}

// servedBy sends body through nginx and returns the instance that
// answered, failing the test on anything but a 200 from a stand-in.
func (f *fleet) servedBy(body string) string {
	f.t.Helper()
	a := f.send(body)
	var r Reply
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &r) != nil || r.Instance == "" ||
		r.Instance != a.header.Get("X-Served-By") {
		f.t.Fatalf("through nginx: status %d, body %s", a.status, a.body)
	}
	return r.Instance
}

// route asks the sidecar's /v1/route directly, as nginx does.
func (f *fleet) route(body string) answer {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.sidecar.HTTPAddr()+httproute.PathRoute, strings.NewReader(body))
	req.Header.Set(httproute.OriginalURIHeader, "/v1/chat/completions")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// pickAudit is the sidecar's full audit of a pick of pool (/v1/pick), for
// the prefix of a chat body when body is not "".
func (f *fleet) pickAudit(pool, body string) *pb.PickResponse {
	f.t.Helper()
	req := &pb.PickRequest{Pool: pool}
	if body != "" {
		m, err := gateway.NewMapper(gateway.Config{}, nil)
		if err != nil {
			f.t.Fatal(err)
		}
		if err := m.Map(gateway.Request{Path: "/v1/chat/completions", Body: []byte(body)}, req); err != nil {
			f.t.Fatal(err)
		}
	}
	js, err := protojson.Marshal(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.Post("http://"+f.sidecar.HTTPAddr()+httproute.PathPick, "application/json", strings.NewReader(string(js)))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out pb.PickResponse
	if resp.StatusCode != http.StatusOK || protojson.Unmarshal(b, &out) != nil {
		f.t.Fatalf("/v1/pick %s: %d %s", pool, resp.StatusCode, b)
	}
	return &out
}

// waitHeld waits until the sidecar's index has every prefix block of
// body on instance (from its cache events) and returns how many there are.
func (f *fleet) waitHeld(pool, instance, body string) int {
	f.t.Helper()
	var blocks uint32
	servertest.EventuallyOK(f.t, func() string {
		d := f.pickAudit(pool, body).GetDecision()
		blocks = d.GetBlocks()
		for _, in := range d.GetInstances() {
			if in.GetInstanceId() == instance {
				if in.GetMatchedBlocks() != blocks || blocks == 0 {
					return fmt.Sprintf("%s holds %d of the %d blocks", instance, in.GetMatchedBlocks(), blocks)
				}
				return ""
			}
		}
		return instance + " is not in the audit"
	})
	return int(blocks)
}

// systemPrompt is a long shared system prompt: 8,400 bytes, estimated at
// 2,100 tokens, ~1 s of prefill at the stand-ins' 2,000 tokens/s. The
// instance holding it costs ~1 s less than any other, and the instance
// softmax (δ = 20 ms) gives each other instance 2^-50 of its odds: a
// request sharing the prompt lands elsewhere about once in 10^15.
var systemPrompt = strings.Repeat("You are a careful assistant. Answer in one short paragraph. ", 140)

// chat is an OpenAI chat completion body for model with a system and a
// user message (no system message when system is "").
func chat(model, system, user string, stream bool) string {
	var msgs []map[string]string
	if system != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": system})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": user})
	b, _ := json.Marshal(map[string]any{"model": model, "messages": msgs, "stream": stream})
	return string(b)
}
