package daemon

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/testpki"
)

// secureEnv is a daemon with a tokens file, TLS and a client CA, on
// loopback, with the tokens and client certificates of its identities
// (testpki.PKI lists them).
type secureEnv struct {
	t *testing.T
	d *Daemon
	*testpki.PKI
	files auth.TLSFiles // as the daemon runs with them
}

// startSecure runs the daemon with a testpki.PKI's TLS, client CA and
// tokens file, its files checked every 20 ms; mutate may change the config
// first.
func startSecure(t *testing.T, mutate func(*Config)) *secureEnv {
	t.Helper()
	e := &secureEnv{t: t, PKI: testpki.New(t)}
	e.files = e.TLS
	e.files.ReloadInterval = 20 * time.Millisecond
	e.d = obsStart(t, func(c *Config) {
		c.TokensFile, c.TLS, c.Server.DataDir = e.TokensFile, e.files, filepath.Join(e.Dir, "data")
		if mutate != nil {
			mutate(c)
		}
	})
	return e
}

// reloadStats are the reload counts of the daemon's tokens file and TLS
// files.
func (e *secureEnv) reloadStats() (tokens, tls auth.ReloadStats) {
	return e.d.auth.(*auth.Authenticator).ReloadStats(), e.d.tls.(*auth.TLSServer).ReloadStats()
}

// dial connects over TLS trusting the test server CA, presenting the named
// client certificate ("" for none).
func (e *secureEnv) dial(certName string) *grpc.ClientConn {
	e.t.Helper()
	cfg := &tls.Config{RootCAs: e.CA.Pool(), ServerName: "localhost"}
	if certName != "" {
		c, ok := e.Cert[certName]
		if !ok {
			e.t.Fatalf("no test certificate %q", certName)
		}
		// Sent whatever CAs the server names (Certificates would be
		// withheld when its issuer is not among them).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c.TLS, nil }
	}
	cc, err := grpc.NewClient(e.d.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cc.Close() })
	return cc
}

// as returns a context carrying the named identity's bearer token ("" for
// none; a name without a token is sent as a bogus token).
func (e *secureEnv) as(name string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.t.Cleanup(cancel)
	if name == "" {
		return ctx
	}
	tok, ok := e.Token[name]
	if !ok {
		tok = "not-a-known-token-" + name
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// openReport opens a stream and waits for the ack of its first report.
func openReport(t *testing.T, ctx context.Context, cc *grpc.ClientConn, pool, dep, id string) pb.LoadService_ReportLoadClient {
	t.Helper()
	st, err := pb.NewLoadServiceClient(cc).ReportLoad(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.ReportLoadRequest{Pool: pool, Deployment: dep, InstanceId: id, Address: id + ":8000",
		Seq: 1, PrefillTokensPerSecond: 10000}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("first ack: %v", err)
	}
	return st
}

// report opens a stream, sends one report and returns the ack's error.
func report(ctx context.Context, cc *grpc.ClientConn, pool, dep, id string) error {
	st, err := pb.NewLoadServiceClient(cc).ReportLoad(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&pb.ReportLoadRequest{Pool: pool, Deployment: dep, InstanceId: id, Address: id + ":8000",
		Seq: 1, PrefillTokensPerSecond: 10000}); err != nil {
		_, err = st.Recv()
		return err
	}
	_, err = st.Recv()
	st.CloseSend()
	return err
}

// authCalls are the RPCs of the auth table, each returning its error.
var authCalls = map[string]func(context.Context, *grpc.ClientConn) error{
	"Pick": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewPickServiceClient(cc).Pick(ctx, &pb.PickRequest{Pool: "chat", PromptTokens: 10})
		return err
	},
	"ReportOutcome": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewPickServiceClient(cc).ReportOutcome(ctx, &pb.ReportOutcomeRequest{Outcomes: []*pb.Outcome{
			{Pool: "chat", InstanceId: "a-9", Status: pb.OutcomeStatus_OUTCOME_STATUS_CONNECT_FAILED}}})
		return err
	},
	"ReportLoad chat/a": func(ctx context.Context, cc *grpc.ClientConn) error { return report(ctx, cc, "chat", "a", "a-9") },
	"ReportLoad chat/b": func(ctx context.Context, cc *grpc.ClientConn) error { return report(ctx, cc, "chat", "b", "b-9") },
	"ReportLoad other/a": func(ctx context.Context, cc *grpc.ClientConn) error {
		return report(ctx, cc, "other", "a", "o-9")
	},
	"SetWeights": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewAdminServiceClient(cc).SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 1, "b": 0}})
		return err
	},
	"SetPolicy": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewAdminServiceClient(cc).SetPolicy(ctx, &pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{}})
		return err
	},
	"GetWeights": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewAdminServiceClient(cc).GetWeights(ctx, &pb.GetWeightsRequest{Pool: "chat"})
		return err
	},
	"AbortRamp": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewAdminServiceClient(cc).AbortRamp(ctx, &pb.AbortRampRequest{Pool: "nope"})
		return err
	},
	"GetRamp": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewAdminServiceClient(cc).GetRamp(ctx, &pb.GetRampRequest{Pool: "nope"})
		return err
	},
	"ListPools": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := pb.NewAdminServiceClient(cc).ListPools(ctx, &pb.ListPoolsRequest{})
		return err
	},
	"Health": func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	},
	"Reflection": func(ctx context.Context, cc *grpc.ClientConn) error {
		st, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
			_, err = st.Recv() // the status the server ended the stream with
			return err
		}
		_, err = st.Recv()
		return err
	},
}
