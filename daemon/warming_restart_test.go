package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/server"
)

// warmEnv is a daemon on a data dir with every pick front end: gRPC, the
// HTTP /v1/pick and /v1/route, and ext_proc.
type warmEnv struct {
	t     *testing.T
	d     *Daemon
	cc    *grpc.ClientConn
	pick  pb.PickServiceClient
	load  pb.LoadServiceClient
	admin pb.AdminServiceClient
	ext   extprocv3.ExternalProcessorClient
}

// startWarm starts a daemon on dir with the three front ends on loopback.
func startWarm(t *testing.T, dir string) *warmEnv {
	t.Helper()
	d, err := Start(Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		Server:    server.Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		FrontEnds: []frontend.GRPC{extproc.FrontEnd("127.0.0.1:0", frontend.TLSPlaintext, extproc.Options{})}})
	if err != nil {
		t.Fatalf("Start on %s: %v", dir, err)
	}
	e := &warmEnv{t: t, d: d}
	if e.cc, err = grpc.NewClient(d.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	ext, err := grpc.NewClient(d.FrontEndAddr("extproc"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ext.Close() })
	e.pick, e.load, e.admin = pb.NewPickServiceClient(e.cc), pb.NewLoadServiceClient(e.cc), pb.NewAdminServiceClient(e.cc)
	e.ext = extprocv3.NewExternalProcessorClient(ext)
	return e
}

// stop shuts the daemon down (its report streams end).
func (e *warmEnv) stop() {
	e.t.Helper()
	e.cc.Close()
	must(e.t, e.d.Shutdown(context.Background()))
}

// report connects an instance of pool with one acknowledged report; the
// stream stays open until the daemon stops or the test ends.
func (e *warmEnv) report(pool, id string) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	st, err := e.load.ReportLoad(ctx)
	must(e.t, err)
	must(e.t, st.Send(&pb.ReportLoadRequest{Pool: pool, Deployment: "d", InstanceId: id, Address: "10.0.0.1:8000", Seq: 1,
		KvCapacityBlocks: 1000, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16}))
	if _, err := st.Recv(); err != nil {
		e.t.Fatalf("report of %s/%s: %v", pool, id, err)
	}
}

// httpPick posts body to path with the pool and returns the status, the
// Retry-After header and the body.
func (e *warmEnv) httpPick(path, pool string) (int, string, []byte) {
	e.t.Helper()
	body := `{"pool":"` + pool + `"}`
	url := "http://" + e.d.HTTPAddr() + path
	if path == httproute.PathRoute {
		body, url = `{"model":"m","prompt":"hi"}`, url+"?pool="+pool
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	must(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httproute.OriginalURIHeader, "/v1/completions")
	resp, err := http.DefaultClient.Do(req)
	must(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(e.t, err)
	return resp.StatusCode, resp.Header.Get("Retry-After"), b
}

// extprocPick sends one buffered OpenAI request for model pool through
// ext_proc and returns the immediate response, or nil when the request was
// routed.
func (e *warmEnv) extprocPick(pool string) *extprocv3.ImmediateResponse {
	e.t.Helper()
	st, err := e.ext.Process(context.Background())
	must(e.t, err)
	hs := []*corev3.HeaderValue{{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte("/v1/completions")},
		{Key: "content-type", RawValue: []byte("application/json")}}
	must(e.t, st.Send(&extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}}},
		ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: procmode.ProcessingMode_BUFFERED,
			ResponseBodyMode: procmode.ProcessingMode_BUFFERED}}))
	must(e.t, st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(`{"model":"` + pool + `","prompt":"hi"}`), EndOfStream: true}}}))
	for {
		r, err := st.Recv()
		if err != nil {
			e.t.Fatalf("ext_proc stream ended without an answer to the body: %v", err)
		}
		if ir := r.GetImmediateResponse(); ir != nil {
			return ir
		}
		if r.GetRequestBody() != nil {
			must(e.t, st.CloseSend())
			return nil
		}
	}
}

// wantWarming checks that every front end answers a pick from pool as a
// pool warming up: gRPC Unavailable with reason POOL_WARMING, HTTP 503
// with Retry-After and no invalid_request_error, ext_proc the same.
func (e *warmEnv) wantWarming(pool string) {
	e.t.Helper()
	_, err := e.pick.Pick(context.Background(), &pb.PickRequest{Pool: pool})
	if status.Code(err) != codes.Unavailable || protoconv.ReasonOf(err) != protoconv.ReasonPoolWarming {
		e.t.Errorf("gRPC Pick from %q: %v (reason %q); want Unavailable with reason %s", pool, err, protoconv.ReasonOf(err), protoconv.ReasonPoolWarming)
	}
	for _, path := range []string{httproute.PathPick, httproute.PathRoute} {
		code, retry, body := e.httpPick(path, pool)
		var oai struct{ Error struct{ Type, Code string } }
		_ = json.Unmarshal(body, &oai)
		if code != http.StatusServiceUnavailable || retry != "1" || oai.Error.Type == "invalid_request_error" ||
			!strings.Contains(string(body), pool) {
			e.t.Errorf("%s from %q: %d, Retry-After %q, %s; want 503, Retry-After 1, not invalid_request_error", path, pool, code, retry, body)
		}
		if path == httproute.PathRoute && oai.Error.Code != "pool_warming" {
			e.t.Errorf("%s from %q: code %q; want pool_warming", path, pool, oai.Error.Code)
		}
	}
	ir := e.extprocPick(pool)
	hs := map[string]string{}
	for _, h := range ir.GetHeaders().GetSetHeaders() {
		hs[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	if ir == nil || ir.GetStatus().GetCode() != 503 || hs["retry-after"] != "1" || hs["x-prefixroute-reason"] != "pool_warming" {
		e.t.Errorf("ext_proc from %q: %v; want an immediate 503 pool_warming with retry-after 1", pool, ir)
	}
}

// TestRestartPoolWarming: after a restart on the same data dir, before any
// instance reports again, a pool the daemon knew (configured, or only seen
// in reports) answers every front end with a retryable "warming" status,
// never NotFound; a pool never seen stays NotFound (and takes no weights
// without allow_new_pool); once an instance reports again, picks succeed.
func TestRestartPoolWarming(t *testing.T) {
	dir := t.TempDir()
	e := startWarm(t, dir)
	e.report("chat", "c1")
	e.report("seen", "s1")
	if _, err := e.admin.SetWeights(context.Background(), &pb.SetWeightsRequest{Pool: "chat", Weights: map[string]float64{"d": 1}}); err != nil {
		t.Fatal(err)
	}
	for _, pool := range []string{"chat", "seen"} {
		if _, err := e.pick.Pick(context.Background(), &pb.PickRequest{Pool: pool}); err != nil {
			t.Fatalf("Pick from %q before the restart: %v", pool, err)
		}
	}
	e.stop()

	e = startWarm(t, dir)
	defer e.stop()
	e.wantWarming("chat") // configured: weights in state.json
	e.wantWarming("seen") // only reported into: seen.json
	_, err := e.pick.Pick(context.Background(), &pb.PickRequest{Pool: "nope"})
	if status.Code(err) != codes.NotFound || protoconv.ReasonOf(err) != "" {
		t.Errorf("Pick from a pool never seen: %v; want NotFound without a reason", err)
	}
	if code, retry, _ := e.httpPick(httproute.PathRoute, "nope"); code != http.StatusNotFound || retry != "" {
		t.Errorf("/v1/route from a pool never seen: %d, Retry-After %q; want 404 without", code, retry)
	}

	// Known from seen.json, a pool takes weights without allow_new_pool;
	// a pool never seen does not.
	if _, err := e.admin.SetWeights(context.Background(), &pb.SetWeightsRequest{Pool: "seen", Weights: map[string]float64{"d": 1}}); err != nil {
		t.Errorf("SetWeights to a pool seen before the restart: %v", err)
	}
	if _, err := e.admin.SetWeights(context.Background(), &pb.SetWeightsRequest{Pool: "nope", Weights: map[string]float64{"d": 1}}); status.Code(err) != codes.NotFound {
		t.Errorf("SetWeights to a pool never seen: %v; want NotFound", err)
	}
	e.wantWarming("seen") // configured now, still no instance

	e.report("chat", "c1")
	e.report("seen", "s1")
	for _, pool := range []string{"chat", "seen"} {
		if _, err := e.pick.Pick(context.Background(), &pb.PickRequest{Pool: pool}); err != nil {
			t.Errorf("gRPC Pick from %q once its instance reported again: %v", pool, err)
		}
		if code, _, body := e.httpPick(httproute.PathRoute, pool); code != http.StatusNoContent {
			t.Errorf("/v1/route from %q once its instance reported again: %d %s", pool, code, body)
		}
		if ir := e.extprocPick(pool); ir != nil {
			t.Errorf("ext_proc from %q once its instance reported again: %v", pool, ir)
		}
	}
}
