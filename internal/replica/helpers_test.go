package replica

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
	"github.com/prefixroute/prefixroute/scheduler"
)

// testHost is a Host of a real registry and data dir, as prefixrouted's
// server is, without the gRPC layer: Install sets the pool's weights and
// policy as the server does.
type testHost struct {
	mu  sync.Mutex // the configuration lock
	reg *state.Registry
	st  *store.Store
}

func (h *testHost) Locked(fn func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fn()
}
func (h *testHost) Registry() *state.Registry { return h.reg }
func (h *testHost) Store() *store.Store       { return h.st }
func (h *testHost) Install(pool string, pc store.PoolConfig) error {
	p, err := h.reg.Ensure(pool)
	if err != nil {
		return err
	}
	pol := scheduler.DefaultPolicy()
	if pc.Policy != nil {
		pol = *pc.Policy
	}
	p.SetConfig(&state.Config{Weights: pc.Weights, WeightsVersion: pc.WeightsVersion, Policy: pol, PolicyVersion: pc.PolicyVersion})
	return nil
}

// frozen is the clock of the live state in these tests.
var frozen = time.Unix(1_800_000_000, 0)

func frozenNow() time.Time { return frozen }

// newHost returns a testHost on a new data dir, closed at cleanup.
func newHost(t *testing.T) *testHost {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{Now: frozenNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("store.Close: %v", err)
		}
	})
	return &testHost{reg: state.NewRegistry(state.Limits{}), st: st}
}

// startReplica starts a Replica named name on a new testHost, joined to
// the NATS server at url with applyTimeout, and closes it at cleanup.
func startReplica(t *testing.T, url, name string, applyTimeout time.Duration) (*Replica, *testHost) {
	t.Helper()
	h := newHost(t)
	r, err := New(h, Options{Cluster: cluster.Config{URLs: []string{url}, Name: name, FlushInterval: time.Millisecond,
		ApplyTimeout: applyTimeout, ReconnectWait: 50 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: frozenNow})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(r.Close)
	return r, h
}

// stream is an instance reporting to a replica, driven as the server's
// ReportLoad handler drives it: StreamOpened before the session connects,
// every report applied to the session and then passed on (Reported),
// StreamEnded at cleanup.
type stream struct {
	t    *testing.T
	r    *Replica
	reg  *state.Registry
	id   state.Identity
	sess *state.Session
	seq  uint64
}

// connect opens instance id's stream on r (whose host is h).
func connect(t *testing.T, r *Replica, h *testHost, id state.Identity) *stream {
	t.Helper()
	r.StreamOpened(id.Pool, id.Instance)
	p, err := h.reg.Ensure(id.Pool)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := p.Connect(frozen, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close(frozen); r.StreamEnded(id.Pool, id.Instance, true) })
	return &stream{t: t, r: r, reg: h.reg, id: id, sess: sess}
}

// report numbers m as the stream's next report, applies it and passes it
// on.
func (s *stream) report(m *pb.ReportLoadRequest) {
	s.t.Helper()
	s.seq++
	m.Seq = s.seq
	var rep state.Report
	if err := protoconv.ReportOf(s.reg, m, &rep); err != nil {
		s.t.Fatalf("report %d: %v", m.Seq, err)
	}
	if err := s.sess.Report(frozen, &rep); err != nil {
		s.t.Fatalf("report %d: %v", m.Seq, err)
	}
	s.r.Reported(s.id, m)
}

// cachedBlocks is the number of blocks h's registry holds for the only
// instance of pool; 0 when the pool does not have exactly one instance.
func cachedBlocks(h *testHost, pool string) int {
	p, err := h.reg.Pool(pool)
	if err != nil {
		return 0
	}
	ins := p.Instances(frozen)
	if len(ins) != 1 {
		return 0
	}
	return ins[0].CachedBlocks
}
