package deploy

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// envoySample is deploy/envoy/envoy.yaml decoded strictly (protojson:
// unknown fields fail) into go-control-plane's types and validated by
// Envoy's own rules, with the parts the tests read.
type envoySample struct {
	clusters map[string]*clusterv3.Cluster
	routes   []*routev3.Route // the one virtual host's, in order
	ext      *procmode.ExternalProcessor
}

func loadEnvoySample(t *testing.T) envoySample {
	t.Helper()
	b, err := os.ReadFile("envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("envoy.yaml is not an Envoy bootstrap: %v", err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml fails Envoy's validation: %v", err)
	}
	s := envoySample{clusters: map[string]*clusterv3.Cluster{}}
	for _, c := range bs.GetStaticResources().GetClusters() {
		s.clusters[c.GetName()] = c
	}
	for _, l := range bs.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					t.Fatal(err)
				}
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					s.routes = append(s.routes, vh.GetRoutes()...)
				}
				for _, hf := range hcm.GetHttpFilters() {
					if strings.HasSuffix(hf.GetTypedConfig().GetTypeUrl(), "ext_proc.v3.ExternalProcessor") {
						s.ext = &procmode.ExternalProcessor{}
						if err := hf.GetTypedConfig().UnmarshalTo(s.ext); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
	}
	if s.ext == nil {
		t.Fatal("no ext_proc filter")
	}
	return s
}

// TestEnvoyConfig: the ext_proc filter's cluster is on port 9002,
// health-checked for the ext_proc service, and the ORIGINAL_DST cluster
// reads the header the endpoint picker sets.
func TestEnvoyConfig(t *testing.T) {
	s := loadEnvoySample(t)
	epp := s.clusters[s.ext.GetGrpcService().GetEnvoyGrpc().GetClusterName()]
	if epp == nil {
		t.Fatalf("ext_proc cluster %q is not defined", s.ext.GetGrpcService().GetEnvoyGrpc().GetClusterName())
	}
	addr := epp.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if addr.GetPortValue() != 9002 || epp.GetHealthChecks()[0].GetGrpcHealthCheck().GetServiceName() != extproc.ServiceName {
		t.Errorf("ext_proc cluster on port %d health-checking %q; want 9002 and %s", addr.GetPortValue(),
			epp.GetHealthChecks()[0].GetGrpcHealthCheck().GetServiceName(), extproc.ServiceName)
	}
	var orig *clusterv3.Cluster
	for _, c := range s.clusters {
		if c.GetType() == clusterv3.Cluster_ORIGINAL_DST {
			orig = c
		}
	}
	if orig == nil || !orig.GetOriginalDstLbConfig().GetUseHttpHeader() || orig.GetOriginalDstLbConfig().GetHttpHeaderName() != gateway.DestinationHeader {
		t.Errorf("ORIGINAL_DST cluster %v, want it to read %s", orig, gateway.DestinationHeader)
	}
}

// TestEnvoyExtprocProcessing: the ext_proc filter sends what the
// Processor needs and no more (docs/envoy.md): the request headers and
// body in FULL_DUPLEX_STREAMED (with the request trailers, which Envoy
// requires in that mode), the response headers (the outcome) and the
// response body STREAMED, of which the Processor answers the first chunk
// (the ttft) and then ends the stream (FULL_DUPLEX_STREAMED would pass
// every chunk through it); a message_timeout for the answers Envoy waits
// for; and Envoy accepts the envoy.lb metadata the Processor writes
// (without receiving_namespaces it drops it). The old sample sent every
// response chunk in FULL_DUPLEX_STREAMED and dropped the metadata.
func TestEnvoyExtprocProcessing(t *testing.T) {
	s := loadEnvoySample(t)
	m := s.ext.GetProcessingMode()
	want := &procmode.ProcessingMode{
		RequestHeaderMode: procmode.ProcessingMode_SEND, RequestBodyMode: procmode.ProcessingMode_FULL_DUPLEX_STREAMED,
		RequestTrailerMode: procmode.ProcessingMode_SEND, ResponseHeaderMode: procmode.ProcessingMode_SEND,
		ResponseBodyMode: procmode.ProcessingMode_STREAMED, ResponseTrailerMode: procmode.ProcessingMode_SKIP,
	}
	if !proto.Equal(m, want) {
		t.Errorf("processing_mode %v;\nwant %v", m, want)
	}
	if s.ext.GetMessageTimeout().AsDuration() <= 0 {
		t.Errorf("message_timeout %v; want one set (Envoy's default is 200 ms)", s.ext.GetMessageTimeout())
	}
	if ns := s.ext.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(); !slices.Contains(ns, extproc.MetadataNamespace) {
		t.Errorf("metadata_options.receiving_namespaces.untyped %v; want %s, or Envoy drops the decision's metadata", ns, extproc.MetadataNamespace)
	}
	if s.ext.GetAllowModeOverride() {
		t.Error("allow_mode_override is set; the Processor sends no mode_override")
	}
}

// TestEnvoyFailOpenRoute: with failure_mode_allow, a request the picker
// did not decide (picker down, or no body) takes a route to a cluster of
// model servers, not to ORIGINAL_DST, even when the client sent its own
// x-gateway-destination-endpoint (which the picker would have removed):
// the routed route matches the envoy.lb metadata only the picker writes.
// A decided request takes ORIGINAL_DST. Fails on the old sample
// (failure_mode_allow false, the routed route matched the header).
func TestEnvoyFailOpenRoute(t *testing.T) {
	s := loadEnvoySample(t)
	if !s.ext.GetFailureModeAllow() {
		t.Error("failure_mode_allow is false; the sample shows fail-open (docs/failopen.md)")
	}
	for _, tc := range []struct {
		name     string
		metadata bool // the picker wrote envoy.lb / x-gateway-destination-endpoint
		wantOrig bool
	}{
		{"decided by the picker", true, true},
		{"picker down, the client's own destination header", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := firstMatch(t, s.routes, tc.metadata)
			c := s.clusters[r.GetRoute().GetCluster()]
			if c == nil {
				t.Fatalf("route %v: cluster %q is not defined", r.GetMatch(), r.GetRoute().GetCluster())
			}
			orig := c.GetType() == clusterv3.Cluster_ORIGINAL_DST
			if orig != tc.wantOrig {
				t.Fatalf("routed to %s (ORIGINAL_DST %v), want ORIGINAL_DST %v", c.GetName(), orig, tc.wantOrig)
			}
			if !orig && len(c.GetLoadAssignment().GetEndpoints()) == 0 {
				t.Errorf("fallback cluster %s has no endpoints", c.GetName())
			}
		})
	}
}

// firstMatch is the first route a POST /v1/chat/completions carrying
// x-gateway-destination-endpoint matches, with or without the picker's
// metadata. It fails on matchers it does not model, so that it cannot
// pass by ignoring them.
func firstMatch(t *testing.T, routes []*routev3.Route, metadata bool) *routev3.Route {
	t.Helper()
	for _, r := range routes {
		m := r.GetMatch()
		if m.GetPrefix() != "/" {
			t.Fatalf("route match %v: only prefix / is modelled", m)
		}
		ok := true
		for _, h := range m.GetHeaders() {
			if h.GetName() != gateway.DestinationHeader || !h.GetPresentMatch() {
				t.Fatalf("header matcher %v: only %s present_match is modelled", h, gateway.DestinationHeader)
			}
			ok = ok && !h.GetInvertMatch() // the header is present either way
		}
		for _, d := range m.GetDynamicMetadata() {
			p := d.GetPath()
			if d.GetFilter() != extproc.MetadataNamespace || len(p) != 1 || p[0].GetKey() != gateway.DestinationHeader || !d.GetValue().GetPresentMatch() {
				t.Fatalf("metadata matcher %v: only %s / %s present_match is modelled", d, extproc.MetadataNamespace, gateway.DestinationHeader)
			}
			ok = ok && metadata != d.GetInvert()
		}
		if ok {
			return r
		}
	}
	t.Fatal("no route matches")
	return nil
}
