package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/httproute"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// BenchmarkHTTPRouteVsGRPCPick measures, for one ~16 KiB chat prompt
// (~4,000 tokens, 256 text blocks), a gRPC Pick with the prompt's hashes
// computed beforehand, POST /v1/pick with the same PickRequest in protobuf
// JSON, POST /v1/route with the OpenAI body itself (the sidecar parses and
// hashes it), and a gRPC Pick preceded by the gateway's own parsing and
// hashing of the body (grpc+hash), each over one keep-alive connection to
// the same daemon,
// interleaved so that all three see the same machine; it reports each and
// the HTTP/gRPC ratios. All three ask for the full audit, which /v1/route
// needs for its fallbacks.
func BenchmarkHTTPRouteVsGRPCPick(b *testing.B) {
	for _, n := range []int{8, 64} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			e, _, refresh := benchEnv(b, n, 2)
			body := chatBody("m", strings.Repeat("You are a careful assistant; answer briefly and cite sources. ", 256))
			m, err := gateway.NewMapper(gateway.Config{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			req := &pb.PickRequest{}
			if err := m.Map(gateway.Request{Path: "/v1/chat/completions", Body: []byte(body)}, req); err != nil {
				b.Fatal(err)
			}
			pickJSON, err := protojson.Marshal(req)
			if err != nil {
				b.Fatal(err)
			}
			base := "http://" + e.D.HTTPAddr()
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			b.Cleanup(tr.CloseIdleConnections)
			hc := &http.Client{Transport: tr}
			do := func(path, payload string, want int) {
				r, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(payload))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(httproute.OriginalURIHeader, "/v1/chat/completions")
				resp, err := hc.Do(r)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					b.Fatalf("%s: status %d", path, resp.StatusCode)
				}
			}
			bg := context.Background()
			hreq := &pb.PickRequest{}
			var grpcDur, hashDur, pickDur, routeDur time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				if _, err := e.Pick.Pick(bg, req); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				do(httproute.PathPick, string(pickJSON), http.StatusOK)
				t2 := time.Now()
				do(httproute.PathRoute, body, http.StatusNoContent)
				t3 := time.Now()
				// What a gRPC gateway does for the same body: parse and
				// hash it itself, then Pick.
				if err := m.Map(gateway.Request{Path: "/v1/chat/completions", Body: []byte(body)}, hreq); err != nil {
					b.Fatal(err)
				}
				if _, err := e.Pick.Pick(bg, hreq); err != nil {
					b.Fatal(err)
				}
				t4 := time.Now()
				grpcDur, pickDur, routeDur, hashDur = grpcDur+t1.Sub(t0), pickDur+t2.Sub(t1), routeDur+t3.Sub(t2), hashDur+t4.Sub(t3)
				if i%100 == 99 {
					// Reports reset the optimistic accounting, as live instances would.
					b.StopTimer()
					refresh()
					b.StartTimer()
				}
			}
			N := float64(b.N)
			b.ReportMetric(float64(grpcDur.Nanoseconds())/N, "grpc-ns/op")
			b.ReportMetric(float64(pickDur.Nanoseconds())/N, "httppick-ns/op")
			b.ReportMetric(float64(routeDur.Nanoseconds())/N, "route-ns/op")
			b.ReportMetric(float64(pickDur)/float64(grpcDur), "httppick/grpc")
			b.ReportMetric(float64(routeDur)/float64(grpcDur), "route/grpc")
			b.ReportMetric(float64(hashDur.Nanoseconds())/N, "grpc+hash-ns/op")
			b.ReportMetric(float64(routeDur)/float64(hashDur), "route/grpc+hash")
		})
	}
}

// chatBody is an OpenAI chat request for model with one user message.
func chatBody(model, text string) string {
	b, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": text}}})
	return string(b)
}
