package client_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/testpki"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// secure is testpki's PKI.Secure as a startSidecar option.
func secure(p *testpki.PKI, withTLS bool) func(*daemon.Config) {
	return func(c *daemon.Config) { c.TokensFile, c.TLS = p.Files(withTLS) }
}

// dialAs connects over TLS (trusting the test CA) with the named identity's
// token ("" for none), closed at the end of the test.
func dialAs(t *testing.T, p *testpki.PKI, addr, who string) *grpc.ClientConn {
	t.Helper()
	cfg, err := client.TLSConfig(p.ServerCA, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := client.DialWith(addr, client.DialOptions{TLS: cfg, Token: p.Token[who]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestSecureReporterAndPicker runs a Reporter with an instance token bound
// to chat/a and a Picker with a gateway token against a daemon with a
// tokens file, TLS and a client CA, over loopback.
func TestSecureReporterAndPicker(t *testing.T) {
	p := testpki.New(t)
	s := startSidecar(t, "127.0.0.1:0", "", secure(p, true))

	inst := dialAs(t, p, s.addr, "inst-a")
	r := reporter(t, inst, client.ReporterOptions{Pool: "chat", Deployment: "a", InstanceID: "a-1"})
	ops := dialAs(t, p, s.addr, "ops")
	testwait.EventuallyOK(t, func() string {
		if st := r.Stats(); st.Acks == 0 || !st.Connected {
			return "no ack yet: " + errText(st.LastError)
		}
		if instanceStatus(ops, "chat", "a-1") == nil {
			return "a-1 not listed"
		}
		return ""
	})

	// Outside its binding, the same token is refused, and says so.
	out := reporter(t, inst, client.ReporterOptions{Pool: "chat", Deployment: "b", InstanceID: "b-1"})
	testwait.EventuallyOK(t, func() string {
		err := out.Stats().LastError
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `bound to pool "chat" deployment "a"`) {
			return "LastError " + errText(err) + ", want PermissionDenied naming the binding"
		}
		return ""
	})
	if st := out.Stats(); st.Acks != 0 {
		t.Errorf("the out-of-binding reporter got %d acks", st.Acks)
	}

	pk := newPicker(t, dialAs(t, p, s.addr, "gw"), client.PickerOptions{Pool: "chat", Timeout: 5 * time.Second})
	res, err := pk.Pick(context.Background(), client.Request{Tokens: iota32(0, 64)})
	if err != nil || res.InstanceID != "a-1" || res.Fallback {
		t.Fatalf("gateway Pick = %+v, %v; want a-1 from the sidecar", res, err)
	}

	for _, tc := range []struct {
		who  string
		want codes.Code
	}{{"", codes.Unauthenticated}, {"reader", codes.PermissionDenied}} {
		pk := newPicker(t, dialAs(t, p, s.addr, tc.who), client.PickerOptions{Pool: "chat", Timeout: 5 * time.Second})
		if _, err := pk.Pick(context.Background(), client.Request{Tokens: iota32(0, 64)}); status.Code(err) != tc.want || client.Unreachable(err) {
			t.Errorf("Pick as %q: %v, want %v", tc.who, err, tc.want)
		}
	}
}

// TestSecureMutualTLS: a client certificate from TLSConfig proves identity
// alice (operator) without a token.
func TestSecureMutualTLS(t *testing.T) {
	p := testpki.New(t)
	s := startSidecar(t, "127.0.0.1:0", "", secure(p, true))
	cfg, err := client.TLSConfig(p.ServerCA, p.AliceCert, p.AliceKey, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := client.DialWith(s.addr, client.DialOptions{TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pb.NewAdminServiceClient(cc).SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 1}}); err != nil {
		t.Fatalf("SetWeights with alice's certificate: %v", err)
	}
}

// TestInsecureToken: a token without TLS is refused before dialling unless
// InsecureToken is set; with it, a loopback plaintext daemon with a tokens
// file accepts the token.
func TestInsecureToken(t *testing.T) {
	p := testpki.New(t)
	s := startSidecar(t, "127.0.0.1:0", "", secure(p, false))
	if _, err := client.DialWith(s.addr, client.DialOptions{Token: p.Token["reader"]}); err == nil || !strings.Contains(err.Error(), "needs TLS") {
		t.Fatalf("token without TLS: %v, want a refusal", err)
	}
	cc, err := client.DialWith(s.addr, client.DialOptions{Token: p.Token["reader"], InsecureToken: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pb.NewAdminServiceClient(cc).ListPools(ctx, &pb.ListPoolsRequest{}); err != nil {
		t.Fatalf("ListPools with InsecureToken: %v", err)
	}
	if _, err := pb.NewAdminServiceClient(dial(t, s.addr)).ListPools(ctx, &pb.ListPoolsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListPools without token: %v, want Unauthenticated", err)
	}
	if _, err := client.DialWith(s.addr, client.DialOptions{Token: "two words", InsecureToken: true}); err == nil || strings.Contains(err.Error(), "two") {
		t.Errorf("token with a space: %v, want an error that does not echo it", err)
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, want, err string }{
		{"secret-1\n", "secret-1", ""},
		{"  secret-2  \r\nignored second line\n", "secret-2", ""},
		{"secret-3", "secret-3", ""},
		{"\nsecret-4\n", "", "first line is empty"},
		{"", "", "first line is empty"},
		{"sec ret\n", "", "printable ASCII"},
	} {
		path := filepath.Join(dir, "tok")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := client.ReadTokenFile(path)
		if got != tc.want || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ReadTokenFile(%q) = %q, %v; want %q, error %q", tc.content, got, err, tc.want, tc.err)
		}
	}
	if _, err := client.ReadTokenFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestTLSConfigErrors(t *testing.T) {
	p := testpki.New(t)
	for _, tc := range []struct{ ca, cert, key, want string }{
		{p.AliceCert + ".missing", "", "", "no such file"},
		{p.AliceKey, "", "", "no PEM certificate"},
		{p.ServerCA, p.AliceCert, "", "both"},
		{p.ServerCA, p.AliceCert, p.ServerCA, "client certificate"},
	} {
		if _, err := client.TLSConfig(tc.ca, tc.cert, tc.key, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TLSConfig(%q, %q, %q): %v, want %q", tc.ca, tc.cert, tc.key, err, tc.want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
