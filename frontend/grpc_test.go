package frontend_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/prefixroute/prefixroute/frontend"
)

func TestParseTLSMode(t *testing.T) {
	for in, want := range map[string]frontend.TLSMode{"": frontend.TLSDaemon, "daemon": frontend.TLSDaemon,
		"plaintext": frontend.TLSPlaintext, "self-signed": frontend.TLSSelfSigned} {
		if got, err := frontend.ParseTLSMode(in); err != nil || got != want {
			t.Errorf("ParseTLSMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := frontend.ParseTLSMode("on"); err == nil || !strings.Contains(err.Error(), `"on" is not daemon, plaintext or self-signed`) {
		t.Errorf("ParseTLSMode(on): %v", err)
	}
}

func TestGRPCCheck(t *testing.T) {
	reg := func(grpc.ServiceRegistrar, frontend.Deps) ([]string, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		f    frontend.GRPC
		err  string
	}{
		{"valid", frontend.GRPC{Name: "extproc", Register: reg, TLS: frontend.TLSSelfSigned}, ""},
		{"no name", frontend.GRPC{Register: reg}, "front end without a name"},
		{"no register", frontend.GRPC{Name: "x"}, "front end x has no Register function"},
		{"bad tls", frontend.GRPC{Name: "x", Register: reg, TLS: "on"}, `--x-tls: "on" is not`},
	} {
		err := tc.f.Check()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}
