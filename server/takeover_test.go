package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testpki"
)

// takeoverIdentities are the tokens file of the takeover tests: the
// identities of the security review's reproduction (F1).
var takeoverIdentities = []struct{ name, roles, bind string }{
	{"gw", "[gateway]", ""},
	{"reader", "[operator-read]", ""},
	{"inst-any", "[instance]", ""},
	{"inst-pa", "[instance]", "{pool: P, deployment: a}"},
	{"inst-pa-a1", "[instance]", "{pool: P, deployment: a, instance_id: a-1}"},
	{"inst-pb", "[instance]", "{pool: P, deployment: b}"},
	{"inst-pb-a1", "[instance]", "{pool: P, deployment: b, instance_id: a-1}"},
	{"inst-p", "[instance]", "{pool: P}"},
}

// syncBuffer is a log sink safe for the daemon's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// takeoverEnv is a sidecar with the takeover tokens file and its log.
type takeoverEnv struct {
	t   *testing.T
	sc  *servertest.Sidecar
	log *syncBuffer
}

func startTakeover(t *testing.T, mutate func(*daemon.Config)) *takeoverEnv {
	t.Helper()
	var b strings.Builder
	b.WriteString("identities:\n")
	for _, id := range takeoverIdentities {
		fmt.Fprintf(&b, "  - name: %s\n    roles: %s\n    token_sha256: %s\n", id.name, id.roles, auth.HashToken(testpki.Token(id.name)))
		if id.bind != "" {
			fmt.Fprintf(&b, "    bind: %s\n", id.bind)
		}
	}
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &takeoverEnv{t: t, log: &syncBuffer{}}
	e.sc = servertest.Start(t, servertest.Logger(slog.New(slog.NewTextHandler(e.log, nil))),
		servertest.Config(func(c *daemon.Config) {
			c.TokensFile = file
			if mutate != nil {
				mutate(c)
			}
		}))
	return e
}

// as is a context carrying the identity's bearer token.
func (e *takeoverEnv) as(name string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	e.t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+testpki.Token(name))
}

// report opens a ReportLoad stream as who for P/dep/inst and returns it
// after its first report's ack, or the status the first report got.
func (e *takeoverEnv) report(who, dep, inst string) (pb.LoadService_ReportLoadClient, error) {
	e.t.Helper()
	st, err := e.sc.Load.ReportLoad(e.as(who))
	if err != nil {
		e.t.Fatalf("ReportLoad: %v", err)
	}
	r := &pb.ReportLoadRequest{Pool: "P", Deployment: dep, InstanceId: inst, Address: who + "." + inst + ":8000",
		Seq: 1, PrefillTokensPerSecond: 1000}
	// io.EOF from Send: the daemon ended the stream first (a refusal may
	// come before the report is sent); Recv returns its status.
	if err := st.Send(r); err != nil && !errors.Is(err, io.EOF) {
		e.t.Fatalf("send: %v", err)
	}
	if _, err := st.Recv(); err != nil {
		return nil, err
	}
	return st, nil
}

// batchReport reports P/dep/inst as who on a new ReportLoadBatch stream and
// returns the code the instance ended with (OK: acked, still open).
func (e *takeoverEnv) batchReport(who, dep, inst string) codes.Code {
	e.t.Helper()
	st, err := e.sc.Load.ReportLoadBatch(e.as(who))
	if err != nil {
		e.t.Fatalf("ReportLoadBatch: %v", err)
	}
	r := &pb.ReportLoadRequest{Pool: "P", Deployment: dep, InstanceId: inst, Address: who + "." + inst + ":8000",
		Seq: 1, PrefillTokensPerSecond: 1000}
	if err := st.Send(&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{r}}); err != nil {
		e.t.Fatalf("send: %v", err)
	}
	resp, err := st.Recv()
	if err != nil {
		e.t.Fatalf("batch recv: %v", err)
	}
	for _, end := range resp.GetEnded() {
		if end.GetInstance().GetInstanceId() == inst {
			if !strings.Contains(end.GetMessage(), inst) {
				e.t.Errorf("end message %q does not name the instance", end.GetMessage())
			}
			return codes.Code(end.GetCode())
		}
	}
	return codes.OK
}

// where returns P's instances as "inst@deployment address".
func (e *takeoverEnv) where() map[string]string {
	e.t.Helper()
	r, err := e.sc.Admin.ListInstances(e.as("reader"), &pb.ListInstancesRequest{Pool: "P"})
	if err != nil {
		e.t.Fatalf("ListInstances: %v", err)
	}
	out := map[string]string{}
	for _, in := range r.GetInstances() {
		out[in.GetInstanceId()] = in.GetDeployment() + " " + in.GetAddress()
	}
	return out
}

// picks returns how many of n Picks of P went to each deployment.
func (e *takeoverEnv) picks(n int) map[string]int {
	e.t.Helper()
	got := map[string]int{}
	for range n {
		r, err := e.sc.Pick.Pick(e.as("gw"), &pb.PickRequest{Pool: "P", PromptTokens: 16})
		if err != nil {
			e.t.Fatalf("Pick: %v", err)
		}
		got[r.GetDeployment()]++
	}
	return got
}

// takeovers is prefixroute_instance_takeovers_total{pool="P",outcome}.
func (e *takeoverEnv) takeovers(outcome string) float64 {
	v, _ := servertest.MetricValue(e.sc.Metrics(), "prefixroute_instance_takeovers_total",
		map[string]string{"pool": "P", "outcome": outcome})
	return v
}
