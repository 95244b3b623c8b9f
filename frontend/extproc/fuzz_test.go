package extproc_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/prefixroute/prefixroute/frontend/extproc"
)

// sequence decodes fuzz input into ext_proc messages. The first byte picks
// the body mode; then each op byte is one message: request headers (with
// or without end of stream, with or without a subset hint), a request
// body chunk of the next byte's length taken from body (end of stream or
// not), request trailers, response headers (served or not), a response
// body, response trailers, or an empty message.
func sequence(ops, body []byte) []*extprocv3.ProcessingRequest {
	if len(ops) == 0 {
		return nil
	}
	modes := []procmode.ProcessingMode_BodySendMode{procmode.ProcessingMode_NONE, duplex, buffered,
		procmode.ProcessingMode_STREAMED, procmode.ProcessingMode_BUFFERED_PARTIAL, procmode.ProcessingMode_GRPC}
	mode := modes[int(ops[0])%len(modes)]
	var out []*extprocv3.ProcessingRequest
	for i := 1; i < len(ops) && len(out) < 64; i++ {
		op := ops[i]
		switch op % 10 {
		case 0, 1:
			h := reqHeaders("POST", []string{"/v1/chat/completions", "/v1/completions", "/v1/models", "/x"}[op/10%4], op%2 == 1, mode,
				"x-request-id", "fuzz", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
			if op/40%2 == 1 {
				h = withSubset(h, "10.0.0.1:8000", "10.0.0.2")
			}
			out = append(out, h)
		case 2, 3:
			n := 0
			if i+1 < len(ops) {
				i++
				n = int(ops[i]) * 4
			}
			n = min(n, len(body))
			out = append(out, reqBody(body[:n], op%10 == 3))
			body = body[n:]
		case 4:
			out = append(out, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: &extprocv3.HttpTrailers{}}})
		case 5:
			out = append(out, respHeaders([]string{"", "10.0.0.1:8000", "10.9.9.9:1"}[op/10%3]))
		case 6, 7:
			out = append(out, respBody([]byte("data: x\n\n"), op%10 == 7))
		case 8:
			out = append(out, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: &extprocv3.HttpTrailers{}}})
		case 9:
			out = append(out, &extprocv3.ProcessingRequest{})
		}
	}
	return out
}

// memStream is a Process stream in memory: Recv returns msgs in order,
// then io.EOF; Send records the responses.
type memStream struct {
	grpc.ServerStream
	ctx  context.Context
	msgs []*extprocv3.ProcessingRequest
	sent []*extprocv3.ProcessingResponse
}

func (m *memStream) Context() context.Context { return m.ctx }

func (m *memStream) Recv() (*extprocv3.ProcessingRequest, error) {
	if len(m.msgs) == 0 {
		return nil, io.EOF
	}
	r := m.msgs[0]
	m.msgs = m.msgs[1:]
	return r, nil
}

func (m *memStream) Send(r *extprocv3.ProcessingResponse) error {
	m.sent = append(m.sent, proto.Clone(r).(*extprocv3.ProcessingResponse))
	return nil
}

// FuzzProcess drives a Processor over a real daemon's Server with
// arbitrary message sequences (out-of-order phases, duplicate headers,
// bodies after end of stream): every stream ends, with responses or
// InvalidArgument, and never panics. The stream is in memory (the network
// path is TestRoutedBothModes' and the others'). Each new-coverage input is
// minimized for up to -fuzzminimizetime (60 s) through the daemon, which
// stalls the workers' progress report; run it with -fuzzminimizetime=1x:
//
//	go test -run '^$' -fuzz FuzzProcess -fuzztime 30s -fuzzminimizetime 1x ./server/extproc
func FuzzProcess(f *testing.F) {
	e := start(f, extproc.Options{})
	e.instance("llama", "blue", "b1", "10.0.0.1:8000", 0)
	e.instance("llama", "green", "g1", "10.0.0.2:8000", 0)
	p, err := extproc.New(e.sc.D.Server(), extproc.Options{Fallbacks: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	valid := chatBody("llama", 600, 1)
	f.Add([]byte{1, 0, 3, 200}, valid)                    // duplex: headers, whole body
	f.Add([]byte{2, 0, 3, 200, 5, 7, 8}, valid)           // buffered with the response path
	f.Add([]byte{1, 40, 2, 50, 2, 50, 3, 100, 15}, valid) // subset hint, chunks, served elsewhere
	f.Add([]byte{1, 0, 0, 3, 3, 3, 2}, valid)             // headers twice, bodies after eos
	f.Add([]byte{1, 3, 9, 1, 4}, valid)                   // body first, empty message, trailers
	f.Add([]byte{1, 0, 2, 10, 4, 5, 6, 7}, []byte(`{"model":"llama","prompt":[1,2,3]}`))
	f.Fuzz(func(t *testing.T, ops, body []byte) {
		st := &memStream{ctx: context.Background(), msgs: sequence(ops, body)}
		n := len(st.msgs)
		err := p.Process(st)
		if c := status.Code(err); c != codes.OK && c != codes.InvalidArgument {
			t.Fatalf("%d messages: stream ended with %v after %d responses", n, err, len(st.sent))
		}
		for _, r := range st.sent {
			if ir := r.GetImmediateResponse(); ir != nil && ir.GetStatus().GetCode() == 0 {
				t.Fatalf("immediate response without a status: %v", ir)
			}
		}
	})
}
