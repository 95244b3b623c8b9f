package extproc_test

import (
	"context"
	"crypto/tls"
	"io"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testpki"
)

// secureFrontEnd starts a daemon with the test PKI's tokens file (and its
// TLS files when daemonTLS) and the ext_proc front end with mode, and
// dials the front end over TLS trusting tlsConf.
func secureFrontEnd(t *testing.T, mode frontend.TLSMode, daemonTLS bool, tlsConf func(*testpki.PKI) *tls.Config) extprocv3.ExternalProcessorClient {
	t.Helper()
	pki := testpki.New(t)
	sc := servertest.Start(t, servertest.Config(func(c *daemon.Config) {
		c.TokensFile, c.TLS = pki.Files(daemonTLS)
		c.FrontEnds = append(c.FrontEnds, extproc.FrontEnd("127.0.0.1:0", mode, extproc.Options{}))
	}))
	cc, err := grpc.NewClient(sc.D.FrontEndAddr("extproc"), grpc.WithTransportCredentials(credentials.NewTLS(tlsConf(pki))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return extprocv3.NewExternalProcessorClient(cc)
}

// call sends one chat request with token ("" for none) and returns the
// first response's error: nil when the processor answered (here 404, the
// pool is unknown).
func call(client extprocv3.ExternalProcessorClient, token string) error {
	ctx := context.Background()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	st, err := client.Process(ctx)
	if err != nil {
		return err
	}
	for _, m := range []*extprocv3.ProcessingRequest{reqHeaders("POST", "/v1/chat/completions", false, duplex), reqBody(chatBody("nopool", 100, 1), true)} {
		if err := st.Send(m); err == io.EOF {
			break // the server ended the stream: Recv has its status
		} else if err != nil {
			return err
		}
	}
	st.CloseSend()
	r, err := st.Recv()
	if err != nil {
		return err
	}
	if r.GetImmediateResponse().GetStatus().GetCode() != 404 {
		return status.Errorf(codes.Unknown, "answer %v, want 404", r)
	}
	return nil
}

// TestAuthAndTLS: Process needs the gateway role, over the self-signed
// certificate (verification skipped, as GIE's Envoy config does) or the
// daemon's certificate (verified against its CA).
func TestAuthAndTLS(t *testing.T) {
	for _, tt := range []struct {
		name      string
		mode      frontend.TLSMode
		daemonTLS bool
		conf      func(*testpki.PKI) *tls.Config
	}{
		{"self-signed", frontend.TLSSelfSigned, false, func(*testpki.PKI) *tls.Config { return &tls.Config{InsecureSkipVerify: true} }},
		{"daemon certificate", frontend.TLSDaemon, true, func(p *testpki.PKI) *tls.Config {
			return &tls.Config{RootCAs: p.CA.Pool(), ServerName: "localhost"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := secureFrontEnd(t, tt.mode, tt.daemonTLS, tt.conf)
			for _, c := range []struct {
				identity string
				code     codes.Code
			}{{"gw", codes.OK}, {"", codes.Unauthenticated}, {"reader", codes.PermissionDenied}, {"inst", codes.PermissionDenied}} {
				tok := ""
				if c.identity != "" {
					tok = testpki.Token(c.identity)
				}
				if err := call(client, tok); status.Code(err) != c.code {
					t.Errorf("as %q: %v, want %v", c.identity, err, c.code)
				}
			}
		})
	}
}

// TestAuthTableCoversFrontEnd: every method the ext_proc front end
// registers has a line in the authorization table (internal/auth
// methods.go), and Process is the gateway role's.
func TestAuthTableCoversFrontEnd(t *testing.T) {
	sc := servertest.Start(t)
	gs := grpc.NewServer()
	names, err := extproc.FrontEnd("127.0.0.1:0", frontend.TLSPlaintext, extproc.Options{}).Register(gs, frontend.Deps{Picker: sc.D.Server()})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != extproc.ServiceName {
		t.Fatalf("health names %v, want [%s]", names, extproc.ServiceName)
	}
	n := 0
	for svc, info := range gs.GetServiceInfo() {
		for _, m := range info.Methods {
			n++
			rule, ok := auth.RuleFor("/" + svc + "/" + m.Name)
			if !ok || rule.Open || rule.Role != auth.RoleGateway {
				t.Errorf("/%s/%s: rule %v (in table: %v), want role gateway", svc, m.Name, rule, ok)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d methods registered, want 1 (Process)", n)
	}
}
