package server

import (
	"context"
	"io"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/streamtest"
)

// The fuzz targets drive the real handlers of an in-process Server, a new
// one (with its own data dir) for every input, so that a failure
// reproduces from its input alone. Inputs are protobuf encodings, so the
// fuzzer mutates every field, known or not. Seeds: fuzzSeeds (added by
// each target with addSeeds), and the inputs the fuzzers found under
// testdata/fuzz/Fuzz*/. `make fuzz` runs each target for FUZZTIME; `go test`
// runs the seeds and the found inputs.

var fuzzNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fuzzServer is a Server on a new data dir with a frozen clock.
func fuzzServer(t *testing.T) *Server {
	s, err := New(Options{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return fuzzNow }})
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, "Server", s)
	return s
}

// wantCodeIn fails unless err's code is one of the documented ones.
func wantCodeIn(t *testing.T, what string, err error, allowed ...codes.Code) {
	t.Helper()
	c := status.Code(err)
	for _, a := range allowed {
		if c == a {
			return
		}
	}
	t.Fatalf("%s: code %v (%v) is not one of %v", what, c, err, allowed)
}

// fuzzPool fills pool "chat" with two deployments: a-1 reports cache
// events, a-2 and b-1 are approximate, b-2 is draining.
func fuzzPool(t *testing.T, s *Server) {
	p, err := s.reg.Ensure("chat")
	if err != nil {
		t.Fatal(err)
	}
	cfg := state.DefaultConfig()
	cfg.Weights, cfg.WeightsVersion = map[string]float64{"a": 1, "b": 9}, 1
	p.SetConfig(cfg)
	for _, in := range []struct {
		dep, id  string
		events   bool
		draining bool
	}{{"a", "a-1", true, false}, {"a", "a-2", false, false}, {"b", "b-1", false, false}, {"b", "b-2", false, true}} {
		sess, err := p.Connect(fuzzNow, state.Identity{Pool: "chat", Deployment: in.dep, Instance: in.id, Address: in.id + ":8000"})
		if err != nil {
			t.Fatal(err)
		}
		rep := &state.Report{Seq: 1, PrefillTokensPerSecond: 5000, QueuedPrefillTokens: 100, KVCapacityBlocks: 64,
			ReportsCacheEvents: in.events, Draining: in.draining, Stored: []uint64{1, 2, 3, 4}}
		if err := sess.Report(fuzzNow, rep); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzPick: any PickRequest gets a documented code, and a successful one
// names a known instance with finite, normalised probabilities.
func FuzzPick(f *testing.F) {
	addSeeds(f, "FuzzPick")
	known := map[string]string{"a-1": "a", "a-2": "a", "b-1": "b", "b-2": "b"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req pb.PickRequest
		if proto.Unmarshal(raw, &req) != nil {
			return
		}
		s := fuzzServer(t)
		fuzzPool(t, s)
		resp, err := (&pickService{s: s}).Pick(context.Background(), &req)
		wantCodeIn(t, "Pick", err, codes.OK, codes.InvalidArgument, codes.NotFound, codes.Unavailable, codes.FailedPrecondition)
		if err != nil {
			return
		}
		if known[resp.GetInstanceId()] != resp.GetDeployment() || resp.GetAddress() != resp.GetInstanceId()+":8000" {
			t.Fatalf("picked %q of %q at %q", resp.GetInstanceId(), resp.GetDeployment(), resp.GetAddress())
		}
		sum := 0.0
		for _, d := range resp.GetDecision().GetDeployments() {
			if p := d.GetProbability(); math.IsNaN(p) || p < 0 || p > 1 {
				t.Fatalf("deployment %q probability %v", d.GetDeployment(), p)
			}
			sum += d.GetProbability()
		}
		if resp.GetDecision() != nil && math.Abs(sum-1) > 1e-9 {
			t.Fatalf("deployment probabilities sum to %v", sum)
		}
		for _, in := range resp.GetDecision().GetInstances() {
			if in.GetInstanceId() == resp.GetInstanceId() && !(in.GetJointProbability() > 0 && in.GetJointProbability() <= 1) {
				t.Fatalf("chosen instance has joint probability %v", in.GetJointProbability())
			}
		}
	})
}

// FuzzReportLoad: a stream of up to three arbitrary reports ends with a
// documented code, acks exactly the reports applied, in order, leaves its
// instance disconnected if it connected, and the prefix index agrees with
// every instance's block count.
func FuzzReportLoad(f *testing.F) {
	addSeeds(f, "FuzzReportLoad")
	f.Fuzz(func(t *testing.T, m1, m2, m3 []byte) {
		var msgs []*pb.ReportLoadRequest
		for _, raw := range [][]byte{m1, m2, m3} {
			m := new(pb.ReportLoadRequest)
			if proto.Unmarshal(raw, m) != nil {
				return
			}
			msgs = append(msgs, m)
		}
		s := fuzzServer(t)
		fuzzPool(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st := &streamtest.Stream[pb.ReportLoadRequest, pb.ReportLoadResponse]{Ctx: ctx, In: slices.Clone(msgs)}
		err := (&loadService{s: s}).ReportLoad(st)
		wantCodeIn(t, "ReportLoad", err, codes.OK, codes.InvalidArgument, codes.ResourceExhausted, codes.Aborted)
		if err == nil && len(st.Sent()) != len(msgs) {
			t.Fatalf("stream ended OK with %d acks for %d reports", len(st.Sent()), len(msgs))
		}
		for i, a := range st.Sent() {
			if a.GetSeq() != msgs[i].GetSeq() {
				t.Fatalf("ack %d has seq %d, report had %d", i, a.GetSeq(), msgs[i].GetSeq())
			}
		}
		// A stream that got an ack connected; its instance must be
		// disconnected now (a rejected first report touches nothing).
		fuzzEnded(t, s, func(pool, inst string) bool {
			return len(st.Sent()) > 0 && pool == msgs[0].GetPool() && inst == msgs[0].GetInstanceId()
		})
	})
}

// fuzzEnded fails t when an instance that opened is not disconnected after
// its stream ended, or a pool's index disagrees with its instances' block
// counts.
func fuzzEnded(t *testing.T, s *Server, opened func(pool, inst string) bool) {
	t.Helper()
	for _, p := range s.reg.Pools() {
		sum := 0
		for _, in := range p.Instances(fuzzNow) {
			sum += in.CachedBlocks
			if opened(p.Name(), in.Instance) && in.State != state.StateDisconnected {
				t.Fatalf("instance %q is %v after its stream ended", in.Instance, in.State)
			}
		}
		if _, pairs := p.IndexStats(); pairs != sum {
			t.Fatalf("pool %q: index holds %d (block, instance) pairs, the instances %d blocks", p.Name(), pairs, sum)
		}
	}
}

// FuzzReportLoadBatch: a batch stream of up to three arbitrary messages
// ends with a documented code, acks only seqs its instances reported, in
// order per instance, leaves every instance it opened disconnected, and
// the prefix index agrees with every instance's block count.
func FuzzReportLoadBatch(f *testing.F) {
	addSeeds(f, "FuzzReportLoadBatch")
	f.Fuzz(func(t *testing.T, m1, m2, m3 []byte) {
		var msgs []*pb.ReportLoadBatchRequest
		sent := map[fuzzKey][]uint64{}
		for _, raw := range [][]byte{m1, m2, m3} {
			m := new(pb.ReportLoadBatchRequest)
			if proto.Unmarshal(raw, m) != nil {
				return
			}
			for _, r := range m.GetReports() {
				k := fuzzKey{r.GetPool(), r.GetInstanceId()}
				sent[k] = append(sent[k], r.GetSeq())
			}
			msgs = append(msgs, m)
		}
		s := fuzzServer(t)
		fuzzPool(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st := &streamtest.Stream[pb.ReportLoadBatchRequest, pb.ReportLoadBatchResponse]{Ctx: ctx, In: slices.Clone(msgs)}
		err := (&loadService{s: s}).ReportLoadBatch(st)
		wantCodeIn(t, "ReportLoadBatch", err, codes.OK, codes.InvalidArgument)
		last := map[fuzzKey]uint64{}
		for _, r := range st.Sent() {
			for _, e := range r.GetEnded() {
				wantCodeIn(t, "InstanceEnded", status.Error(codes.Code(e.GetCode()), e.GetMessage()),
					codes.OK, codes.InvalidArgument, codes.ResourceExhausted, codes.Aborted, codes.NotFound)
			}
			for _, a := range r.GetAcks() {
				k := fuzzKey{a.GetInstance().GetPool(), a.GetInstance().GetInstanceId()}
				seq := a.GetAck().GetSeq()
				if !slices.Contains(sent[k], seq) {
					t.Fatalf("ack of %v with seq %d, which it never reported (%v)", k, seq, sent[k])
				}
				last[k] = seq
			}
		}
		fuzzEnded(t, s, func(pool, inst string) bool {
			_, ok := last[fuzzKey{pool, inst}]
			return ok
		})
	})
}

// fuzzKey names an instance of a batch stream.
type fuzzKey struct{ pool, instance string }
