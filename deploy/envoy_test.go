package deploy

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// TestEnvoyConfig: envoy/envoy.yaml is a valid Envoy bootstrap by Envoy's
// own schema (go-control-plane's types and their validation rules), its
// ext_proc filter is in FULL_DUPLEX_STREAMED mode against a cluster on
// port 9002 health-checked for the ext_proc service, and its ORIGINAL_DST
// cluster reads the header the endpoint picker sets.
func TestEnvoyConfig(t *testing.T) {
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
	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range bs.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	var ext *procmode.ExternalProcessor
	for _, l := range bs.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					t.Fatal(err)
				}
				for _, hf := range hcm.GetHttpFilters() {
					if strings.HasSuffix(hf.GetTypedConfig().GetTypeUrl(), "ext_proc.v3.ExternalProcessor") {
						ext = &procmode.ExternalProcessor{}
						if err := hf.GetTypedConfig().UnmarshalTo(ext); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
	}
	if ext == nil {
		t.Fatal("no ext_proc filter")
	}
	if m := ext.GetProcessingMode(); m.GetRequestBodyMode() != procmode.ProcessingMode_FULL_DUPLEX_STREAMED ||
		m.GetRequestTrailerMode() != procmode.ProcessingMode_SEND {
		t.Errorf("processing mode %v, want request body FULL_DUPLEX_STREAMED and trailers sent", m)
	}
	epp := clusters[ext.GetGrpcService().GetEnvoyGrpc().GetClusterName()]
	if epp == nil {
		t.Fatalf("ext_proc cluster %q is not defined", ext.GetGrpcService().GetEnvoyGrpc().GetClusterName())
	}
	addr := epp.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if addr.GetPortValue() != 9002 || epp.GetHealthChecks()[0].GetGrpcHealthCheck().GetServiceName() != extproc.ServiceName {
		t.Errorf("ext_proc cluster on port %d health-checking %q; want 9002 and %s", addr.GetPortValue(),
			epp.GetHealthChecks()[0].GetGrpcHealthCheck().GetServiceName(), extproc.ServiceName)
	}
	var orig *clusterv3.Cluster
	for _, c := range clusters {
		if c.GetType() == clusterv3.Cluster_ORIGINAL_DST {
			orig = c
		}
	}
	if orig == nil || !orig.GetOriginalDstLbConfig().GetUseHttpHeader() || orig.GetOriginalDstLbConfig().GetHttpHeaderName() != gateway.DestinationHeader {
		t.Errorf("ORIGINAL_DST cluster %v, want it to read %s", orig, gateway.DestinationHeader)
	}
}
