package server

import (
	"strings"
	"testing"
)

func TestFrontEndExposure(t *testing.T) {
	fe := func(listen string, tls FrontEndTLS) []FrontEnd {
		return []FrontEnd{{Name: "extproc", Listen: listen, TLS: tls}}
	}
	for _, tt := range []struct {
		name string
		cfg  DaemonConfig
		err  string
	}{
		{"loopback without tokens", DaemonConfig{FrontEnds: fe("127.0.0.1:9002", FrontEndPlaintext)}, ""},
		{"off", DaemonConfig{FrontEnds: fe("", FrontEndPlaintext)}, ""},
		{"all interfaces without tokens", DaemonConfig{FrontEnds: fe(":9002", FrontEndSelfSigned)}, "refusing --extproc-listen :9002: no --tokens-file"},
		{"tokens, plaintext", DaemonConfig{TokensFile: "t", FrontEnds: fe(":9002", FrontEndPlaintext)}, "refusing --extproc-listen :9002 without TLS"},
		{"tokens, daemon mode without --tls-cert", DaemonConfig{TokensFile: "t", FrontEnds: fe(":9002", FrontEndTLSDaemon)}, "without TLS"},
		{"tokens, self-signed", DaemonConfig{TokensFile: "t", FrontEnds: fe(":9002", FrontEndSelfSigned)}, ""},
		{"tokens, daemon TLS", DaemonConfig{TokensFile: "t", TLS: TLSFiles{CertFile: "c", KeyFile: "k"}, FrontEnds: fe(":9002", FrontEndTLSDaemon)}, ""},
		{"insecure", DaemonConfig{Insecure: true, FrontEnds: fe(":9002", FrontEndPlaintext)}, ""},
	} {
		err := checkFrontEndExposure(&tt.cfg)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.err)
		}
	}
}

func TestParseFrontEndTLS(t *testing.T) {
	for in, want := range map[string]FrontEndTLS{"": FrontEndTLSDaemon, "daemon": FrontEndTLSDaemon, "plaintext": FrontEndPlaintext, "self-signed": FrontEndSelfSigned} {
		if got, err := ParseFrontEndTLS(in); err != nil || got != want {
			t.Errorf("ParseFrontEndTLS(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFrontEndTLS("on"); err == nil || !strings.Contains(err.Error(), `"on" is not daemon, plaintext or self-signed`) {
		t.Errorf("ParseFrontEndTLS(on): %v", err)
	}
}
