package extproc_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// env is a daemon with the ext_proc front end on loopback and an ext_proc
// client of it, as Envoy would hold.
type env struct {
	t   testing.TB
	sc  *servertest.Sidecar
	cc  *grpc.ClientConn
	ext extprocv3.ExternalProcessorClient
}

// start runs a daemon serving a Processor with opts (Fallbacks as given:
// 0 means none) over plaintext.
func start(t testing.TB, opts extproc.Options, mutate ...func(*daemon.Config)) *env {
	t.Helper()
	o := []servertest.Option{servertest.Config(func(c *daemon.Config) {
		c.FrontEnds = append(c.FrontEnds, extproc.FrontEnd("127.0.0.1:0", frontend.TLSPlaintext, opts))
	})}
	for _, m := range mutate {
		o = append(o, servertest.Config(m))
	}
	sc := servertest.Start(t, o...)
	addr := sc.D.FrontEndAddr("extproc")
	if addr == "" {
		t.Fatal("the extproc front end is not serving")
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &env{t: t, sc: sc, cc: cc, ext: extprocv3.NewExternalProcessorClient(cc)}
}

// instance connects an instance through ReportLoad with one report; the
// stream stays open until the test ends.
func (e *env) instance(pool, deployment, id, addr string, kvUsage float64) {
	e.t.Helper()
	// 2^21 blocks of 16 tokens: the tests' largest prompt (5 MiB of text)
	// fits, so the KV the router projects between reports never makes an
	// instance kv_full in a sequence of subtests with one report.
	e.report(&pb.ReportLoadRequest{Pool: pool, Deployment: deployment, InstanceId: id, Address: addr, Seq: 1,
		KvCacheUsage: kvUsage, KvCapacityBlocks: 1 << 21, PrefillTokensPerSecond: 10000, BlockSizeTokens: 16})
}

// report connects an instance with its first report r; the stream stays
// open until the test ends.
func (e *env) report(r *pb.ReportLoadRequest) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := e.sc.Load.ReportLoad(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := st.Send(r); err != nil {
		e.t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		e.t.Fatalf("report of %s: %v", r.InstanceId, err)
	}
	e.t.Cleanup(func() { st.CloseSend(); cancel() })
}

// weights sets a pool's weights, allow_drain set: the tests' drained pools
// are drained on purpose.
func (e *env) weights(pool string, w map[string]float64) {
	e.t.Helper()
	if _, err := e.sc.Admin.SetWeights(context.Background(), &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: w, AllowDrain: true}); err != nil {
		e.t.Fatal(err)
	}
}

// exchange sends msgs on one Process stream, closes the sending side and
// returns every response until the server ends the stream, with the
// stream's final error (nil after a clean end). Send errors after the
// server ended the stream are ignored, as Envoy would.
func (e *env) exchange(ctx context.Context, msgs ...*extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
	st, err := e.ext.Process(ctx)
	if err != nil {
		return nil, err
	}
	recvd := make(chan struct{})
	var out []*extprocv3.ProcessingResponse
	var rerr error
	go func() {
		defer close(recvd)
		for {
			r, err := st.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					rerr = err
				}
				return
			}
			out = append(out, r)
		}
	}()
	for _, m := range msgs {
		if st.Send(m) != nil {
			break
		}
	}
	st.CloseSend()
	<-recvd
	return out, rerr
}

// reqHeaders is a request_headers message: :method, :path, the extra
// header pairs, end_of_stream; with mode it carries protocol_config (as
// Envoy's first message does).
func reqHeaders(method, path string, eos bool, mode procmode.ProcessingMode_BodySendMode, kv ...string) *extprocv3.ProcessingRequest {
	hs := []*corev3.HeaderValue{{Key: ":method", RawValue: []byte(method)}, {Key: ":path", RawValue: []byte(path)},
		{Key: "content-type", RawValue: []byte("application/json")}}
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	m := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}, EndOfStream: eos}}}
	if mode != procmode.ProcessingMode_NONE {
		m.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: mode, ResponseBodyMode: mode}
	}
	return m
}

// reqBody is a request_body message.
func reqBody(b []byte, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: b, EndOfStream: eos}}}
}

// chunked is the body split into request_body messages of n bytes, the
// last with end_of_stream.
func chunked(body []byte, n int) []*extprocv3.ProcessingRequest {
	var out []*extprocv3.ProcessingRequest
	for len(body) > n {
		out = append(out, reqBody(body[:n], false))
		body = body[n:]
	}
	return append(out, reqBody(body, true))
}

// withSubset puts a subset hint on the message's metadata context.
func withSubset(m *extprocv3.ProcessingRequest, entries ...any) *extprocv3.ProcessingRequest {
	l, err := structpb.NewList(entries)
	if err != nil {
		panic(err)
	}
	m.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		extproc.SubsetNamespace: {Fields: map[string]*structpb.Value{extproc.SubsetKey: structpb.NewListValue(l)}}}}
	return m
}

// respHeaders is a response_headers message with the served endpoint in
// its metadata context ("" for none).
func respHeaders(served string) *extprocv3.ProcessingRequest {
	m := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte("200")}}}}}}
	if served != "" {
		m.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			extproc.MetadataNamespace: {Fields: map[string]*structpb.Value{extproc.ServedKey: structpb.NewStringValue(served)}}}}
	}
	return m
}

// respBody is a response_body message.
func respBody(b []byte, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: b, EndOfStream: eos}}}
}

// decision is what a routed request's responses say.
type decision struct {
	header, metadata string // x-gateway-destination-endpoint in the mutation and in envoy.lb
	clearRouteCache  bool
	extra            map[string]string // other headers set
	body             []byte            // the streamed body, reassembled
	chunks           int
	maxChunk         int
	eos              bool // the streamed body ended with end_of_stream
}

// decisionOf reads the decision from the responses to a request: on the
// request-headers response (duplex) or the request-body response
// (buffered), then the streamed body.
func decisionOf(t testing.TB, rs []*extprocv3.ProcessingResponse) decision {
	t.Helper()
	var d decision
	d.extra = map[string]string{}
	for _, r := range rs {
		var common *extprocv3.CommonResponse
		switch x := r.GetResponse().(type) {
		case *extprocv3.ProcessingResponse_RequestHeaders:
			common = x.RequestHeaders.GetResponse()
		case *extprocv3.ProcessingResponse_RequestBody:
			common = x.RequestBody.GetResponse()
		case *extprocv3.ProcessingResponse_ImmediateResponse:
			t.Fatalf("immediate response %v: %s", x.ImmediateResponse.GetStatus().GetCode(), x.ImmediateResponse.GetBody())
		default:
			continue
		}
		if sb := common.GetBodyMutation().GetStreamedResponse(); sb != nil {
			d.body = append(d.body, sb.GetBody()...)
			d.chunks++
			d.maxChunk = max(d.maxChunk, len(sb.GetBody()))
			d.eos = sb.GetEndOfStream()
		}
		for _, h := range common.GetHeaderMutation().GetSetHeaders() {
			if h.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
				t.Errorf("header %s set with append action %v, want OVERWRITE_IF_EXISTS_OR_ADD", h.GetHeader().GetKey(), h.GetAppendAction())
			}
			if h.GetHeader().GetKey() == "x-gateway-destination-endpoint" {
				d.header = string(h.GetHeader().GetRawValue())
			} else {
				d.extra[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
			}
		}
		if common.GetClearRouteCache() {
			d.clearRouteCache = true
		}
		if md := r.GetDynamicMetadata(); md != nil {
			d.metadata = md.GetFields()[extproc.MetadataNamespace].GetStructValue().GetFields()["x-gateway-destination-endpoint"].GetStringValue()
		}
	}
	return d
}

// scrape fetches and parses the daemon's /metrics.
func (e *env) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	resp, err := http.Get("http://" + e.sc.HTTPAddr() + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return fams
}

// counter sums the family's series whose labels include want.
func counter(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// send sends msgs on st in order and fails the test on the first error.
func send(t testing.TB, st extprocv3.ExternalProcessor_ProcessClient, msgs ...*extprocv3.ProcessingRequest) {
	t.Helper()
	for _, m := range msgs {
		if err := st.Send(m); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}
