package server

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/store"
)

// adminSnapshot is what a rejected change must leave as it was.
type adminSnapshot struct {
	stored    store.PoolConfig
	file      []byte
	live      *state.Config // nil when the pool does not exist
	auditSize int64
}

func snapshotOf(t *testing.T, s *Server, pool string) adminSnapshot {
	snap := adminSnapshot{}
	snap.stored, _ = s.store.Pool(pool)
	snap.file, _ = os.ReadFile(filepath.Join(s.store.Dir(), "state.json"))
	if p, err := s.reg.Pool(pool); err == nil {
		snap.live = p.Config()
	}
	if fi, err := os.Stat(s.store.AuditLogPath()); err == nil {
		snap.auditSize = fi.Size()
	}
	return snap
}

// reopened closes s's store and returns the pool's configuration as a new
// Open reads it from disk.
func reopened(t *testing.T, s *Server, pool string) store.PoolConfig {
	if err := s.store.Close(); err != nil {
		t.Fatalf("close the store before reopening it: %v", err)
	}
	st, err := store.Open(s.store.Dir(), store.Options{})
	if err != nil {
		t.Fatalf("reopen after an acknowledged change: %v", err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Errorf("close the reopened store: %v", err)
		}
	}()
	pc, _ := st.Pool(pool)
	return pc
}

// FuzzSetWeights: any SetWeightsRequest after a first change either fails
// with a documented code leaving memory, the state file and the audit log
// as they were, or is applied in full, in memory and on disk.
func FuzzSetWeights(f *testing.F) {
	addSeeds(f, "FuzzSetWeights")
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req pb.SetWeightsRequest
		if proto.Unmarshal(raw, &req) != nil {
			return
		}
		s := fuzzServer(t)
		as := &adminService{s: s}
		ctx := context.Background()
		if _, err := as.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 1, "b": 9}}); err != nil {
			t.Fatal(err)
		}
		before := snapshotOf(t, s, req.GetPool())
		resp, err := as.SetWeights(ctx, &req)
		wantCodeIn(t, "SetWeights", err, codes.OK, codes.InvalidArgument, codes.Aborted, codes.ResourceExhausted)
		if err != nil {
			if after := snapshotOf(t, s, req.GetPool()); !reflect.DeepEqual(after, before) {
				t.Fatalf("rejected SetWeights (%v) changed the state:\nbefore %+v\nafter  %+v", err, before, after)
			}
			return
		}
		if resp.GetVersion() != before.stored.WeightsVersion+1 || !maps.Equal(resp.GetWeights(), req.GetWeights()) {
			t.Fatalf("SetWeights answered version %d weights %v for %v at version %d",
				resp.GetVersion(), resp.GetWeights(), req.GetWeights(), before.stored.WeightsVersion)
		}
		for d, w := range resp.GetWeights() {
			if !(w >= 0 && w <= 1e6) {
				t.Fatalf("accepted weight %v for %q", w, d)
			}
		}
		live, _ := s.reg.Pool(req.GetPool())
		if live == nil || live.Config().WeightsVersion != resp.GetVersion() || !maps.Equal(live.Config().Weights, req.GetWeights()) {
			t.Fatalf("live configuration does not show the change")
		}
		if disk := reopened(t, s, req.GetPool()); disk.WeightsVersion != resp.GetVersion() || !maps.Equal(disk.Weights, req.GetWeights()) {
			t.Fatalf("on disk: version %d weights %v; acknowledged %d %v", disk.WeightsVersion, disk.Weights, resp.GetVersion(), resp.GetWeights())
		}
	})
}

// FuzzSetPolicy: the same for SetPolicy; an accepted policy validates and
// reads back identical from memory and from disk.
func FuzzSetPolicy(f *testing.F) {
	addSeeds(f, "FuzzSetPolicy")
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req pb.SetPolicyRequest
		if proto.Unmarshal(raw, &req) != nil {
			return
		}
		s := fuzzServer(t)
		as := &adminService{s: s}
		ctx := context.Background()
		if _, err := as.SetPolicy(ctx, &pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{DeltaMs: proto.Float64(30)}}); err != nil {
			t.Fatal(err)
		}
		before := snapshotOf(t, s, req.GetPool())
		resp, err := as.SetPolicy(ctx, &req)
		wantCodeIn(t, "SetPolicy", err, codes.OK, codes.InvalidArgument, codes.ResourceExhausted)
		if err != nil {
			if after := snapshotOf(t, s, req.GetPool()); !reflect.DeepEqual(after, before) {
				t.Fatalf("rejected SetPolicy (%v) changed the state:\nbefore %+v\nafter  %+v", err, before, after)
			}
			return
		}
		live, _ := s.reg.Pool(req.GetPool())
		if resp.GetVersion() != before.stored.PolicyVersion+1 || live == nil || live.Config().PolicyVersion != resp.GetVersion() {
			t.Fatalf("SetPolicy answered version %d after %d", resp.GetVersion(), before.stored.PolicyVersion)
		}
		p := live.Config().Policy
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted policy does not validate: %v", err)
		}
		if !proto.Equal(resp.GetPolicy(), policyProto(&p)) {
			t.Fatalf("answered %v, in force %v", resp.GetPolicy(), policyProto(&p))
		}
		if disk := reopened(t, s, req.GetPool()); disk.Policy == nil || !reflect.DeepEqual(*disk.Policy, p) || disk.PolicyVersion != resp.GetVersion() {
			t.Fatalf("on disk: %+v, in force %+v", disk.Policy, p)
		}
	})
}
