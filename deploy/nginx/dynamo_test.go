package nginx

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// NVIDIA Dynamo's routing headers (lib/llm, protocols: HEADER_WORKER_INSTANCE_ID,
// HEADER_PREFILL_INSTANCE_ID and their compatibility aliases).
const (
	dynamoWorkerHeader       = "x-dynamo-worker-instance-id"
	dynamoPrefillHeader      = "x-dynamo-prefill-instance-id"
	dynamoWorkerHeaderAlias  = "x-worker-instance-id"
	dynamoPrefillHeaderAlias = "x-prefill-instance-id"
)

// errDynamoNoPrefill is the error text of Dynamo's PrefillRouter in
// --router-mode direct for a request that names no prefill worker.
//
//lint:ignore ST1005 Dynamo's own error text, verbatim.
var errDynamoNoPrefill = errors.New("Prefill worker ID required in Direct routing mode but none found in request. " +
	"Expected prefill_worker_id to be set via x-dynamo-prefill-instance-id header by external router (e.g., EPP).")

// dynamoID reads a worker id as Dynamo's apply_header_routing_overrides
// does: the header, or its alias only when the header is absent, parsed as
// a u64 (Rust's parse takes one leading '+'); an unparsable value is no id.
func dynamoID(h http.Header, name, alias string) (uint64, bool) {
	v := h.Values(name)
	if len(v) == 0 {
		v = h.Values(alias)
	}
	if len(v) == 0 {
		return 0, false
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(v[0], "+"), 10, 64)
	return id, err == nil
}

// dynamoDirect checks a request as Dynamo's frontend in --router-mode
// direct serving a disaggregated model does before it routes: a decode
// worker id (the stand-in's own error text) and a prefill worker id
// (Dynamo's, errDynamoNoPrefill).
func dynamoDirect(h http.Header) error {
	if _, ok := dynamoID(h, dynamoWorkerHeader, dynamoWorkerHeaderAlias); !ok {
		return errors.New("direct routing: no decode worker id in " + dynamoWorkerHeader)
	}
	if _, ok := dynamoID(h, dynamoPrefillHeader, dynamoPrefillHeaderAlias); !ok {
		return errDynamoNoPrefill
	}
	return nil
}

// dynamoLines are the nginx lines docs/disaggregation.md gives for Dynamo,
// read from the doc so that the test runs what it says.
func dynamoLines(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/disaggregation.md")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for l := range strings.Lines(string(doc)) {
		if s := strings.TrimSpace(l); strings.HasPrefix(s, "proxy_set_header x-dynamo-") {
			lines = append(lines, s)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("docs/disaggregation.md has %d proxy_set_header x-dynamo- lines, want 2: %q", len(lines), lines)
	}
	return strings.Join(lines, "\n            ")
}

// TestNginxDynamoDirect: nginx as docs/disaggregation.md configures it for
// NVIDIA Dynamo in --router-mode direct, in front of decode pods whose
// frontend checks each request as Dynamo's does (dynamoDirect), with
// prefixagent's instance ids set to Dynamo worker ids. Under pd_mode
// always every request reaches the chosen decode instance with its own
// worker id and the prefill instance's, short and cached prompts
// included; a retry on the fallback decode instance carries the
// fallback's worker id, not the failed one's. Under pd_mode conditional a
// short prompt is prefilled locally and the frontend refuses it, as Dynamo
// would: that is why the docs say to set always. Failed open, a request
// still names the worker that serves it.
func TestNginxDynamoDirect(t *testing.T) {
	const prefillLine = "proxy_set_header x-prefixroute-prefill-instance $prefixroute_prefill_instance;"
	var deadAddr string
	sidecarDown := false
	f, pre, dec := startPDFleetNamed(t, func(line string) bool {
		return strings.Contains(line, "(111: Connection refused) while connecting to upstream") &&
			(deadAddr != "" && strings.Contains(line, deadAddr) || sidecarDown && strings.Contains(line, "/v1/route"))
	}, "7001", [2]string{"7101", "7102"}, [2]string{prefillLine, prefillLine + "\n            " + dynamoLines(t)})
	check := dynamoDirect
	for _, in := range dec {
		in.frontend.Store(&check)
	}
	setMode := func(m pb.PdMode) {
		t.Helper()
		if _, err := f.sidecar.Admin.SetPolicy(context.Background(), &pb.SetPolicyRequest{Pool: "pd",
			Policy: &pb.Policy{PdMode: m}}); err != nil {
			t.Fatal(err)
		}
	}
	// served fails unless a was served by a decode instance that got its
	// own worker id and the prefill instance's; it returns that instance.
	served := func(a answer, what string) *standIn {
		t.Helper()
		in := dec[a.header.Get("X-Served-By")]
		if a.status != http.StatusOK || in == nil {
			t.Fatalf("%s: %d %s; want 200 from a decode instance", what, a.status, a.body)
		}
		if got := in.received(dynamoWorkerHeader); !slices.Equal(got, []string{in.name}) {
			t.Errorf("%s: %s received %s %q, want its own id", what, in.name, dynamoWorkerHeader, got)
		}
		if got := in.received(dynamoPrefillHeader); !slices.Equal(got, []string{pre.name}) {
			t.Errorf("%s: %s received %s %q, want %s", what, in.name, dynamoPrefillHeader, got, pre.name)
		}
		return in
	}

	setMode(pb.PdMode_PD_MODE_ALWAYS)
	long := chat("pd", systemPrompt, "question 0", false)
	holder := served(f.send(long), "long uncached prompt")
	served(f.send(chat("pd", "", "hello", false)), "short prompt")
	f.waitHeld("pd", holder.name, long)
	served(f.send(long), "long prompt, cached on its decode instance")

	// One decode instance's server dies while its reporter says ok: a
	// request the sidecar sends there first is retried on the other,
	// with the other's worker id.
	deadAddr = holder.addr
	_ = holder.srv.Close() // the server is gone; its reporter goes on saying ok
	retried := false
	for i := 0; !retried && i < 40; i++ {
		in := served(f.send(chat("pd", systemPrompt, fmt.Sprintf("retry %d", i), false)), "after a decode instance died")
		l := f.accessLine()
		if retried = strings.Contains(l, "upstream="+holder.addr+" : "+in.addr+" "); retried && in == holder {
			t.Fatalf("access log %q: served by %s, which is gone", l, holder.name)
		}
	}
	if !retried {
		t.Fatalf("the sidecar never named %s first in 40 requests", holder.name)
	}

	// pd_mode conditional: the short prompt is prefilled on its decode
	// instance, and Dynamo's frontend refuses a request without a prefill
	// worker.
	setMode(pb.PdMode_PD_MODE_CONDITIONAL)
	a := f.send(chat("pd", "", "hello again", false))
	if msg := errDynamoNoPrefill.Error(); a.status != http.StatusInternalServerError || !strings.Contains(a.body, msg) {
		t.Fatalf("short prompt under pd_mode conditional: %d %s; want 500 with Dynamo's %q", a.status, a.body, msg)
	}

	// Fail-open (the sidecar stopped): the static list's instance ids name
	// each try, so the decode instance that serves still gets its own
	// worker id (and no prefill id: an aggregated Dynamo fleet's case).
	for _, in := range dec {
		in.frontend.Store(nil)
	}
	sidecarDown = true
	f.sidecar.Stop()
	a = f.send(long)
	in := dec[a.header.Get("X-Served-By")]
	if a.status != http.StatusOK || in == nil || a.header.Get(fallbackHeader) != "static" {
		t.Fatalf("sidecar down: %d %v %s; want 200 from a decode instance by the static list", a.status, a.header, a.body)
	}
	if got := in.received(dynamoWorkerHeader); !slices.Equal(got, []string{in.name}) {
		t.Errorf("failed open: %s received %s %q, want its own id", in.name, dynamoWorkerHeader, got)
	}
	if got := in.received(dynamoPrefillHeader); len(got) != 0 {
		t.Errorf("failed open: %s received %s %q, want none", in.name, dynamoPrefillHeader, got)
	}
}
