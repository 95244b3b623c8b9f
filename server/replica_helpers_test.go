package server_test

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// Helpers of the replica tests (replica_*_test.go).

// scrape fetches and parses a daemon's /metrics.
func scrape(t testing.TB, e *servertest.Sidecar) map[string]*dto.MetricFamily {
	return e.Metrics()
}

// familyNames lists the families whose name starts with prefix, for
// failure messages.
func familyNames(fams map[string]*dto.MetricFamily, prefix string) string {
	var out []string
	for n := range fams {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// linkUp reads prefixroute_cluster_link_up from a replica's /metrics.
func linkUp(t *testing.T, e *servertest.Sidecar) float64 {
	t.Helper()
	fams := scrape(t, e)
	v, ok := servertest.MetricValue(fams, "prefixroute_cluster_link_up", nil)
	if !ok {
		t.Fatalf("no single prefixroute_cluster_link_up series; cluster families: %s", familyNames(fams, "prefixroute_cluster"))
	}
	return v
}

// reportsApplied is the load reports e applied from its own streams in
// pool (prefixroute_reports_total of deployment "a").
func reportsApplied(t *testing.T, e *servertest.Sidecar, pool string) float64 {
	t.Helper()
	v, _ := servertest.MetricValue(scrape(t, e), "prefixroute_reports_total", map[string]string{"pool": pool, "deployment": "a"})
	return v
}

// logRecorder is a slog handler keeping every record's message and
// attributes, so a test can read what a replica logged.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct {
	at    time.Time
	msg   string
	attrs map[string]slog.Value
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{at: time.Now(), msg: r.Message, attrs: map[string]slog.Value{}}
	r.Attrs(func(a slog.Attr) bool { rec.attrs[a.Key] = a.Value; return true })
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	return nil
}

// all returns every record so far.
func (l *logRecorder) all() []logRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]logRec(nil), l.recs...)
}

// find returns the records with message msg.
func (l *logRecorder) find(msg string) []logRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRec
	for _, r := range l.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

var _ slog.Handler = (*logRecorder)(nil)

// quietLogger discards everything.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// setArgmin sets the argmin strategy on e for pool and returns the
// policy version.
func setArgmin(t *testing.T, e *servertest.Sidecar, pool string) uint64 {
	t.Helper()
	r, err := e.Admin.SetPolicy(context.Background(), &pb.SetPolicyRequest{AllowNewPool: true, Pool: pool,
		Policy: &pb.Policy{Strategy: pb.Strategy_STRATEGY_ARGMIN}})
	if err != nil {
		t.Fatalf("SetPolicy argmin: %v", err)
	}
	return r.GetVersion()
}

// instances returns a replica's ListInstances for pool keyed by id; nil
// when the pool is unknown there.
func instances(e *servertest.Sidecar, pool string) map[string]*pb.InstanceStatus {
	l, err := e.Admin.ListInstances(context.Background(), &pb.ListInstancesRequest{Pool: pool})
	if err != nil {
		return nil
	}
	out := make(map[string]*pb.InstanceStatus, len(l.GetInstances()))
	for _, in := range l.GetInstances() {
		out[in.GetInstanceId()] = in
	}
	return out
}

// allOK reports whether the replica lists exactly n instances of pool, all OK.
func allOK(e *servertest.Sidecar, pool string, n int) bool {
	ins := instances(e, pool)
	if len(ins) != n {
		return false
	}
	for _, in := range ins {
		if in.GetState() != pb.InstanceState_INSTANCE_STATE_OK {
			return false
		}
	}
	return true
}

// reportLoop keeps sending in's report every interval on its own
// goroutine until the test ends (stopped before the stream is closed).
func reportLoop(t *testing.T, in *instance, every time.Duration, next func() *pb.ReportLoadRequest) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if err := in.trySend(next()); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}
