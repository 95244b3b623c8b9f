package daemon

import (
	"strings"
	"testing"

	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/auth"
)

func TestFrontEndExposure(t *testing.T) {
	fe := func(listen string, tls frontend.TLSMode) []frontend.GRPC {
		return []frontend.GRPC{{Name: "extproc", Listen: listen, TLS: tls}}
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		err  string
	}{
		{"loopback without tokens", Config{FrontEnds: fe("127.0.0.1:9002", frontend.TLSPlaintext)}, ""},
		{"off", Config{FrontEnds: fe("", frontend.TLSPlaintext)}, ""},
		{"all interfaces without tokens", Config{FrontEnds: fe(":9002", frontend.TLSSelfSigned)}, "refusing --extproc-listen :9002: no --tokens-file"},
		{"tokens, plaintext", Config{TokensFile: "t", FrontEnds: fe(":9002", frontend.TLSPlaintext)}, "refusing --extproc-listen :9002 without TLS"},
		{"tokens, daemon mode without --tls-cert", Config{TokensFile: "t", FrontEnds: fe(":9002", frontend.TLSDaemon)}, "without TLS"},
		{"tokens, self-signed", Config{TokensFile: "t", FrontEnds: fe(":9002", frontend.TLSSelfSigned)}, ""},
		{"tokens, daemon TLS", Config{TokensFile: "t", TLS: auth.TLSFiles{CertFile: "c", KeyFile: "k"}, FrontEnds: fe(":9002", frontend.TLSDaemon)}, ""},
		{"insecure", Config{Insecure: true, FrontEnds: fe(":9002", frontend.TLSPlaintext)}, ""},
	} {
		err := checkExposure(&tt.cfg)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.err)
		}
	}
}
