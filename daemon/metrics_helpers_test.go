package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/server"
)

// obsStart starts a daemon on 127.0.0.1:0 (both listeners) with a temp data
// dir, lets mutate adjust its config, and shuts it down at cleanup. It is
// the one starter of this package's own tests, which cannot use
// servertest.Start (servertest imports server); startSecure builds on it.
func obsStart(t *testing.T, mutate func(*Config)) *Daemon {
	t.Helper()
	cfg := Config{Listen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0",
		Server: server.Options{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	if mutate != nil {
		mutate(&cfg)
	}
	d, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.DefaultTimeout)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return d
}

// obsClients dials the daemon and returns its three clients.
func obsClients(t *testing.T, d *Daemon) (pb.PickServiceClient, pb.LoadServiceClient, pb.AdminServiceClient) {
	t.Helper()
	cc, err := grpc.NewClient(d.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewPickServiceClient(cc), pb.NewLoadServiceClient(cc), pb.NewAdminServiceClient(cc)
}

// obsStream is one instance's open report stream.
type obsStream struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[pb.ReportLoadRequest, pb.ReportLoadResponse]
	seq    uint64
}

// obsConnect opens a report stream for the instance; the stream ends at
// cleanup.
func obsConnect(t *testing.T, load pb.LoadServiceClient) *obsStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := load.ReportLoad(ctx)
	if err != nil {
		t.Fatalf("ReportLoad: %v", err)
	}
	return &obsStream{t: t, stream: st}
}

// report sends one report (identity fields filled in by the caller on the
// first) and waits for its ack, so that it is applied on return.
func (s *obsStream) report(r *pb.ReportLoadRequest) {
	s.t.Helper()
	s.seq++
	r.Seq = s.seq
	if r.PrefillTokensPerSecond == 0 {
		r.PrefillTokensPerSecond = 10000
	}
	if err := s.stream.Send(r); err != nil {
		s.t.Fatalf("send report: %v", err)
	}
	ack, err := s.stream.Recv()
	if err != nil {
		s.t.Fatalf("report ack: %v", err)
	}
	if ack.GetSeq() != s.seq {
		s.t.Fatalf("ack seq %d, want %d", ack.GetSeq(), s.seq)
	}
}

// obsScrape fetches /metrics and parses the text exposition.
func obsScrape(t testing.TB, d *Daemon) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// obsSeries returns the series of family name whose labels match want (a
// label wanted "" must be absent), and whether exactly one matched.
func obsSeries(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
	var found *dto.Metric
	n := 0
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && have[k] == v
		}
		if ok {
			found, n = m, n+1
		}
	}
	return found, n == 1
}

// obsValue is the value of the one matching counter or gauge series; it
// fails the test when there is none or more than one.
func obsValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := obsValueOK(fams, name, want)
	if !ok {
		t.Fatalf("%s%v: want exactly one counter or gauge series; family has:\n%s", name, want, obsDump(fams[name]))
	}
	return v
}

// obsValueOK is obsValue reporting, instead of failing, whether exactly one
// counter or gauge series matched.
func obsValueOK(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	m, ok := obsSeries(fams, name, want)
	switch {
	case !ok:
		return 0, false
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

func obsDump(f *dto.MetricFamily) string {
	if f == nil {
		return "  (no such family)"
	}
	var b strings.Builder
	for _, m := range f.GetMetric() {
		b.WriteString("  " + m.String() + "\n")
	}
	return b.String()
}
