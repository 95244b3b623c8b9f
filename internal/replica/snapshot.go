package replica

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
)

// snapshot answers a peer's snapshot request (cluster.Link.ServeSnapshots):
// every pool (allPools) or one, with every live instance this replica
// knows.
func (r *Replica) snapshot(pool string) ([]byte, error) {
	now := r.now()
	reg := r.h.Registry()
	var pools []*state.Pool
	if pool == allPools {
		pools = reg.Pools()
	} else if p, err := reg.Pool(pool); err == nil {
		pools = []*state.Pool{p}
	}
	out := &pb.PoolSnapshots{}
	for _, p := range pools {
		ps := &pb.PoolSnapshot{Pool: p.Name()}
		for _, e := range p.Export(now) {
			ps.Instances = append(ps.Instances, &pb.InstanceSnapshot{Last: protoconv.ReportProto(e.Identity, &e.Last),
				AssignedTokens: e.Assigned, AssignedKvBlocks: e.AssignedKV, ReportAgeMs: float64(e.ReportAge.Microseconds()) / 1000})
		}
		out.Pools = append(out.Pools, ps)
	}
	return proto.Marshal(out)
}

// pullSnapshot asks a peer for every pool's instances and imports those
// that do not report to this replica (package doc, "Catch-up", step 2).
func (r *Replica) pullSnapshot() {
	l := r.link.Load()
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.SnapshotTimeout+4*r.cfg.ApplyTimeout)
	defer cancel()
	start := time.Now()
	r.beginRecording() // before the request: the peer's view may predate what arrives from now on
	data, origin, err := l.RequestSnapshot(ctx, allPools)
	r.cu.applyMu.Lock()
	defer r.cu.applyMu.Unlock()
	rec := r.endRecording()
	clear(r.cu.expect)
	if err != nil {
		r.retrySnapshot(err)
		return
	}
	var snap pb.PoolSnapshots
	if err := proto.Unmarshal(data, &snap); err != nil {
		r.log.Warn("snapshot malformed", "origin", origin, "error", err)
		r.retrySnapshot(err)
		return
	}
	r.cu.pullRetries.Store(0)
	now := r.now()
	n, replayed := 0, 0
	for _, ps := range snap.GetPools() {
		p, err := r.h.Registry().Ensure(ps.GetPool())
		if err != nil {
			r.log.Warn("snapshot pool skipped", "pool", ps.GetPool(), "error", err)
			continue
		}
		for _, is := range ps.GetInstances() {
			if err := r.importInstance(p, now, is); err != nil {
				r.log.Warn("snapshot instance skipped", "pool", ps.GetPool(), "instance", is.GetLast().GetInstanceId(), "error", err)
				continue
			}
			n++
			k := instKey{p.Name(), is.GetLast().GetInstanceId()}
			if r.remoteOf(k) {
				r.replay(p, now, k, is.GetLast().GetSeq(), rec[k])
				replayed += len(rec[k])
			}
		}
	}
	r.log.Info("snapshot applied", "origin", origin, "pools", len(snap.GetPools()), "instances", n,
		"bytes", len(data), "took", time.Since(start).Round(time.Millisecond), "events_recorded", replayed)
}

// importInstance resets the remote session of a snapshot's instance to
// the peer's view of it; a no-op for an instance reporting here.
func (r *Replica) importInstance(p *state.Pool, now time.Time, is *pb.InstanceSnapshot) error {
	m := is.GetLast()
	id := state.Identity{Pool: p.Name(), Deployment: m.GetDeployment(), Instance: m.GetInstanceId(), Address: m.GetAddress()}
	reg := r.h.Registry()
	if err := reg.ValidateIdentity(id); err != nil {
		return err
	}
	e := state.InstanceExport{Identity: id, Assigned: is.GetAssignedTokens(), AssignedKV: is.GetAssignedKvBlocks(),
		ReportAge: time.Duration(is.GetReportAgeMs() * float64(time.Millisecond))}
	if err := protoconv.ReportOf(reg, m, &e.Last); err != nil {
		return err
	}
	s, err := r.session(p, now, id)
	if s == nil || err != nil {
		return err
	}
	return s.Import(now, &e)
}
