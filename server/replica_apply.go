package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/server/cluster"
	"github.com/prefixroute/prefixroute/server/state"
)

// onEvents applies a batch another replica published for pool.
func (r *replica) onEvents(pool, origin string, sentAt time.Time, payloads [][]byte) {
	if pool == allPools { // requests for every pool: only resend is sent so
		r.resendEpoch.Add(1)
		r.applied.Add(uint64(len(payloads)))
		return
	}
	p, err := r.s.reg.Ensure(pool)
	if err != nil {
		r.s.log.Warn("cluster events dropped", "pool", pool, "origin", origin, "error", err)
		return
	}
	now := r.s.opts.Now()
	var ev pb.ClusterEvent
	for _, data := range payloads {
		if err := proto.Unmarshal(data, &ev); err != nil {
			r.s.log.Warn("cluster event malformed", "pool", pool, "origin", origin, "error", err)
			continue
		}
		switch e := ev.Event.(type) {
		case *pb.ClusterEvent_Report:
			err = r.applyReport(p, now, e.Report)
		case *pb.ClusterEvent_Closed:
			r.applyClosed(pool, now, e.Closed.GetInstanceId())
		case *pb.ClusterEvent_Assigned:
			p.Assign(e.Assigned.GetInstanceId(), e.Assigned.GetPrefillTokens(), e.Assigned.GetBlockHashes())
		}
		if err != nil {
			r.s.log.Warn("cluster event not applied", "pool", pool, "origin", origin, "error", err)
		}
		r.applied.Add(1)
	}
}

// session returns the remote session of an instance of pool p, connecting
// it when needed; nil when the instance reports to this replica.
func (r *replica) session(p *state.Pool, now time.Time, id state.Identity) (*state.Session, error) {
	k := instKey{id.Pool, id.Instance}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.local[k] > 0 {
		return nil, nil
	}
	if s := r.remote[k]; s != nil {
		select {
		case <-s.Done(): // replaced or forgotten
		default:
			return s, nil
		}
	}
	s, err := p.Connect(now, id)
	if err != nil {
		return nil, err
	}
	r.remote[k] = s
	return s, nil
}

func (r *replica) applyReport(p *state.Pool, now time.Time, m *pb.ReportLoadRequest) error {
	id := state.Identity{Pool: m.GetPool(), Deployment: m.GetDeployment(), Instance: m.GetInstanceId(), Address: m.GetAddress()}
	if err := r.s.reg.ValidateIdentity(id); err != nil {
		return err
	}
	var rep state.Report
	if err := reportOf(r.s.reg, m, &rep); err != nil {
		return err
	}
	s, err := r.session(p, now, id)
	if s == nil || err != nil {
		return err
	}
	return s.Report(now, &rep)
}

func (r *replica) applyClosed(pool string, now time.Time, instance string) {
	k := instKey{pool, instance}
	r.mu.Lock()
	s := r.remote[k]
	delete(r.remote, k)
	r.mu.Unlock()
	if s != nil {
		s.Close(now)
	}
}

// snapshot answers a peer's snapshot request: every pool (allPools) or
// one, with every live instance this replica knows.
func (r *replica) snapshot(pool string) ([]byte, error) {
	now := r.s.opts.Now()
	var pools []*state.Pool
	if pool == allPools {
		pools = r.s.reg.Pools()
	} else if p, err := r.s.reg.Pool(pool); err == nil {
		pools = []*state.Pool{p}
	}
	out := &pb.PoolSnapshots{}
	for _, p := range pools {
		ps := &pb.PoolSnapshot{Pool: p.Name()}
		for _, e := range p.Export(now) {
			ps.Instances = append(ps.Instances, &pb.InstanceSnapshot{Last: reportProto(e.Identity, &e.Last),
				AssignedTokens: e.Assigned, ReportAgeMs: float64(e.ReportAge.Microseconds()) / 1000})
		}
		out.Pools = append(out.Pools, ps)
	}
	return proto.Marshal(out)
}

// pullSnapshot asks a peer for every pool's instances and imports those
// that do not report to this replica.
func (r *replica) pullSnapshot() {
	l := r.link.Load()
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*r.cfg.ApplyTimeout)
	defer cancel()
	start := time.Now()
	data, origin, err := l.RequestSnapshot(ctx, allPools)
	switch {
	case errors.Is(err, cluster.ErrNoPeers):
		r.s.log.Info("no peer answered the snapshot request: this replica starts from its own reports")
		return
	case err != nil:
		r.s.log.Warn("snapshot request failed; instances fill in as they report", "error", err)
		return
	}
	var snap pb.PoolSnapshots
	if err := proto.Unmarshal(data, &snap); err != nil {
		r.s.log.Warn("snapshot malformed", "origin", origin, "error", err)
		return
	}
	now := r.s.opts.Now()
	n := 0
	for _, ps := range snap.GetPools() {
		p, err := r.s.reg.Ensure(ps.GetPool())
		if err != nil {
			r.s.log.Warn("snapshot pool skipped", "pool", ps.GetPool(), "error", err)
			continue
		}
		for _, is := range ps.GetInstances() {
			if err := r.importInstance(p, now, is); err != nil {
				r.s.log.Warn("snapshot instance skipped", "pool", ps.GetPool(), "instance", is.GetLast().GetInstanceId(), "error", err)
				continue
			}
			n++
		}
	}
	r.s.log.Info("snapshot applied", "origin", origin, "pools", len(snap.GetPools()), "instances", n,
		"bytes", len(data), "took", time.Since(start).Round(time.Millisecond))
}

func (r *replica) importInstance(p *state.Pool, now time.Time, is *pb.InstanceSnapshot) error {
	m := is.GetLast()
	id := state.Identity{Pool: p.Name(), Deployment: m.GetDeployment(), Instance: m.GetInstanceId(), Address: m.GetAddress()}
	if err := r.s.reg.ValidateIdentity(id); err != nil {
		return err
	}
	e := state.InstanceExport{Identity: id, Assigned: is.GetAssignedTokens(),
		ReportAge: time.Duration(is.GetReportAgeMs() * float64(time.Millisecond))}
	if err := reportOf(r.s.reg, m, &e.Last); err != nil {
		return err
	}
	s, err := r.session(p, now, id)
	if s == nil || err != nil {
		return err
	}
	return s.Import(now, &e)
}

// onConfig applies a pool's configuration changed in the bucket: kept in
// the local data dir (the last-known copy for a restart without NATS) and
// put in force.
func (r *replica) onConfig(key string, value []byte, revision uint64, deleted bool) {
	tok, ok := strings.CutPrefix(key, configKeyPrefix)
	if !ok || deleted {
		return
	}
	pool, err := cluster.DecodeToken(tok)
	if err == nil {
		err = r.s.mirror(pool, value, fmt.Sprintf("cluster bucket %s revision %d", r.cfg.Bucket, revision))
	}
	if err != nil {
		r.s.log.Error("cluster configuration not applied", "key", key, "revision", revision, "error", err)
	}
}
