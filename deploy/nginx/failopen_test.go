package nginx

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/openai"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// The lines of nginx.conf the fail-open tests change.
const (
	failOpenLine   = "js_var $prefixroute_fail_open on;"
	staticListLine = `default ""; # (test: the static list)`
	fallbackHeader = "x-prefixroute-fallback"
)

// longPrompt is a 40,000-byte system prompt: over nginx's default
// client_body_buffer_size (16 KiB), so the fail-open script reads it only
// because nginx.conf keeps bodies up to 1 MiB in memory.
var longPrompt = strings.Repeat("You are a patient tutor. Explain each step before the answer. ", 700)[:40000]

// startStaticFleet is a fleet whose stand-ins i-1, i-2, i-3 (pool chat)
// are also nginx's static list, as "i-N=addr", with fail-open on or off.
func startStaticFleet(t *testing.T, failOpen bool, allowed func(string) bool) (*fleet, map[string]*standIn, []string) {
	t.Helper()
	f := startSidecar(t)
	ins := map[string]*standIn{}
	var list []string
	for _, name := range []string{"i-1", "i-2", "i-3"} {
		ins[name] = newStandIn(t, f.cc, "chat", "d", name)
		list = append(list, name+"="+ins[name].addr)
	}
	mode := "on"
	if !failOpen {
		mode = "off"
	}
	f.nginx = startNginx(t, f.sidecar.HTTPAddr(), allowed,
		[2]string{failOpenLine, "js_var $prefixroute_fail_open " + mode + ";"},
		[2]string{staticListLine, `default "` + strings.Join(list, " ") + `";`})
	return f, ins, []string{"i-1", "i-2", "i-3"}
}

// staticRank is the order prefixroute.js's rank gives the endpoints ids
// for a chat body: SHA-1(model "\n" "text " hex(first 64 bytes of the
// canonical text) "\n" id), first 48 bits, highest first. The canonical
// text is internal/openai's, the sidecar's own, so the test also checks
// that the script builds the same text.
func staticRank(t *testing.T, ids []string, body string) []string {
	t.Helper()
	req, err := openai.Parse(openai.ChatCompletions, []byte(body), 0)
	if err != nil || len(req.Text) < 64 {
		t.Fatalf("body %.80s: %v, text of %d bytes (want >= 64)", body, err, len(req.Text))
	}
	key := req.Model + "\ntext " + hex.EncodeToString([]byte(req.Text[:64]))
	score := func(id string) uint64 {
		h := sha1.Sum([]byte(key + "\n" + id))
		v, _ := strconv.ParseUint(hex.EncodeToString(h[:6]), 16, 64)
		return v
	}
	out := append([]string(nil), ids...)
	sort.Slice(out, func(i, j int) bool { return score(out[i]) > score(out[j]) })
	return out
}

// wantStatic fails unless a was served by want through fail-open: 200,
// the fallback header, and an access log line with fallback=static.
func wantStatic(t *testing.T, f *fleet, a answer, want string) {
	t.Helper()
	var r Reply
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &r) != nil || a.header.Get(fallbackHeader) != "static" {
		t.Fatalf("sidecar down, fail-open on: %d %v %s", a.status, a.header, a.body)
	}
	if want != "" && r.Instance != want {
		t.Fatalf("served by %s; the static choice is %s", r.Instance, want)
	}
	// instance= is the first choice, as with the sidecar's lists: the
	// server that answered when no retry was needed.
	if l := f.accessLine(); !strings.Contains(l, "fallback=static ") || !strings.Contains(l, " : ") && !strings.Contains(l, "instance="+r.Instance+" ") {
		t.Fatalf("access log %q: want fallback=static and instance=%s", l, r.Instance)
	}
}

// TestNginxFailOpen: with the sidecar stopped and fail-open on, every
// request is served from the static list, marked as such; requests sharing
// a system prompt land on one instance, the one the rendezvous hash names;
// different prompts spread over all three; a dead endpoint's requests go
// to the next of their ranking; a body nginx cannot hold in memory goes
// to a random endpoint. Restarted, the sidecar routes again, and its own
// "drained" answer is not overridden.
func TestNginxFailOpen(t *testing.T) {
	var sidecarDown bool // from the first stop on (the log is checked at the end)
	var dead string
	f, ins, ids := startStaticFleet(t, true, func(line string) bool {
		return sidecarDown && strings.Contains(line, "(111: Connection refused) while connecting to upstream") && strings.Contains(line, "/v1/route") ||
			dead != "" && strings.Contains(line, "(111: Connection refused) while connecting to upstream") && strings.Contains(line, dead)
	})
	// With the sidecar up nothing is marked.
	a := f.send(chat("chat", longPrompt, "question 0", false))
	if a.status != http.StatusOK || a.header.Get(fallbackHeader) != "" || !strings.Contains(f.accessLine(), "fallback= ") {
		t.Fatalf("sidecar up: %d %v %s; access log %q", a.status, a.header, a.body, f.accessLine())
	}

	grpcAddr, httpAddr, dir := f.sidecar.Addr(), f.sidecar.HTTPAddr(), f.sidecar.Dir
	sidecarDown = true
	f.sidecar.Stop()

	// One system prompt, ten questions: one instance, the hash's.
	want := staticRank(t, ids, chat("chat", longPrompt, "question 1", false))[0]
	for i := 1; i <= 10; i++ {
		wantStatic(t, f, f.send(chat("chat", longPrompt, fmt.Sprintf("question %d", i), false)), want)
	}
	// 30 prompts differing in their first 64 bytes: each on its hash's
	// instance, all three used.
	count := map[string]int{}
	for i := range 30 {
		body := chat("chat", fmt.Sprintf("Tenant %d. You are a concise assistant for this tenant's support desk.", i), "hello", false)
		w := staticRank(t, ids, body)[0]
		wantStatic(t, f, f.send(body), w)
		count[w]++
	}
	if len(count) != 3 {
		t.Fatalf("30 different prompts went to %v, want all three instances", count)
	}
	t.Logf("sidecar down: 30 different prompts spread %v", count)

	// The hash's first choice dead: the request goes to its second.
	rank := staticRank(t, ids, chat("chat", longPrompt, "question 11", false))
	dead = ins[rank[0]].addr
	ins[rank[0]].kill()
	a = f.send(chat("chat", longPrompt, "question 11", false))
	wantStatic(t, f, a, rank[1])
	if l := f.accessLine(); !strings.Contains(l, "upstream="+dead+" : "+ins[rank[1]].addr+" ") {
		t.Fatalf("access log %q: want %s tried, then %s", l, dead, ins[rank[1]].addr)
	}
	// A body over client_body_buffer_size (1 MiB; nginx holds up to 1.25
	// MiB in memory): served by a random
	// live endpoint, still marked (it may try the dead one first).
	wantStatic(t, f, f.send(chat("chat", strings.Repeat("y", 2<<20), "big", false)), "")
	if !strings.Contains(f.nginx.errorLog(), "(no prompt prefix to hash: random)") {
		t.Errorf("error log has no warning of a random static choice:\n%s", f.nginx.errorLog())
	}

	// Restarted on its address and data: nginx routes through it again.
	f.sidecar = servertest.Start(t, servertest.RealClock(), servertest.Dir(dir), servertest.Config(func(c *daemon.Config) {
		c.Listen, c.HTTPListen = grpcAddr, httpAddr
	}))
	servertest.EventuallyOK(t, func() string {
		a := f.send(chat("chat", longPrompt, "after the restart", false))
		if a.status != http.StatusOK || a.header.Get(fallbackHeader) != "" {
			return fmt.Sprintf("after the restart: %d, %s %q", a.status, fallbackHeader, a.header.Get(fallbackHeader))
		}
		if l := f.accessLine(); !strings.Contains(l, "fallback= ") || strings.Contains(l, "instance= ") {
			return "access log " + l + ": want the sidecar's instance and no fallback"
		}
		return ""
	})
	// The sidecar's decision "drained" (every weight 0) is passed on,
	// not failed open.
	if _, err := f.sidecar.Admin.SetWeights(context.Background(), &pb.SetWeightsRequest{Pool: "chat",
		Weights: map[string]float64{"d": 0}, AllowDrain: true}); err != nil {
		t.Fatal(err)
	}
	a = f.send(chat("chat", longPrompt, "drained", false))
	if a.status != http.StatusServiceUnavailable || a.header.Get(gateway.ReasonHeader) != gateway.ReasonDrained || a.header.Get(fallbackHeader) != "" {
		t.Fatalf("drained pool: %d %v %s", a.status, a.header, a.body)
	}
}

// TestNginxFailOpenOff: with fail-open off and the sidecar stopped, nginx
// answers 503 router_unavailable in JSON even though a static list is
// configured.
func TestNginxFailOpenOff(t *testing.T) {
	f, ins, _ := startStaticFleet(t, false, func(line string) bool {
		return strings.Contains(line, "(111: Connection refused) while connecting to upstream") && strings.Contains(line, "/v1/route")
	})
	f.sidecar.Stop()
	a := f.send(chat("chat", longPrompt, "question", false))
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != http.StatusServiceUnavailable ||
		e.Error.Code != "router_unavailable" || e.Error.Type != "server_error" || a.header.Get(fallbackHeader) != "" ||
		a.header.Get(gateway.ReasonHeader) != "router_unavailable" || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("fail-open off, sidecar down: %d %v %s (%v)", a.status, a.header, a.body, err)
	}
	for name, in := range ins {
		if n := in.served.Load(); n != 0 {
			t.Errorf("%s served %d requests; fail-open is off", name, n)
		}
	}
}

// TestNginxFailOpenHungSidecar: a sidecar that accepts the connection but
// never answers fails open after proxy_read_timeout (2 s).
func TestNginxFailOpenHungSidecar(t *testing.T) {
	nginxBinary(t)
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	}()
	sidecar := servertest.Start(t, servertest.RealClock()) // only the stand-in's reports
	cc, err := client.Dial(sidecar.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	in := newStandIn(t, cc, "chat", "d", "i-1")
	f := &fleet{t: t, sidecar: sidecar, cc: cc}
	f.nginx = startNginx(t, hung.Addr().String(), func(line string) bool {
		return strings.Contains(line, "upstream timed out (110: Connection timed out) while reading response header from upstream") &&
			strings.Contains(line, "/v1/route")
	}, [2]string{staticListLine, `default "i-1=` + in.addr + `";`})
	wantStatic(t, f, f.send(chat("chat", longPrompt, "question", false)), "i-1")
	if l := f.accessLine(); !strings.Contains(l, "time=2.") {
		t.Errorf("access log %q: want the 2 s proxy_read_timeout spent first", l)
	}
}
