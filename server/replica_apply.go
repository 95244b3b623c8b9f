package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/state"
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
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.recMu.Lock()
	rec := r.recording
	r.recMu.Unlock()
	for _, data := range payloads {
		if err := proto.Unmarshal(data, &ev); err != nil {
			r.s.log.Warn("cluster event malformed", "pool", pool, "origin", origin, "error", err)
			continue
		}
		switch e := ev.Event.(type) {
		case *pb.ClusterEvent_Report:
			err = r.applyReport(p, now, e.Report)
			if len(r.expect) > 0 {
				r.checkGap(instKey{pool, e.Report.GetInstanceId()}, e.Report.GetSeq())
			}
			if rec != nil {
				r.record(rec, instKey{pool, e.Report.GetInstanceId()}, data)
			}
		case *pb.ClusterEvent_Closed:
			r.applyClosed(pool, now, e.Closed.GetInstanceId())
			if rec != nil {
				r.record(rec, instKey{pool, e.Closed.GetInstanceId()}, data)
			}
		case *pb.ClusterEvent_Assigned:
			p.Assign(e.Assigned.GetInstanceId(), e.Assigned.GetPrefillTokens(), e.Assigned.GetBlockHashes())
		}
		if err != nil {
			r.s.log.Warn("cluster event not applied", "pool", pool, "origin", origin, "error", err)
		}
		r.applied.Add(1)
	}
}

// beginRecording starts recording remote instances' events for the
// snapshot to come (a no-op when already recording, or when catching up by
// resend: resent caches come in order on the instances' own streams).
func (r *replica) beginRecording() {
	if r.catchUp != CatchUpSnapshot {
		return
	}
	r.recMu.Lock()
	if r.recording == nil {
		r.recording = make(map[instKey][][]byte)
	}
	r.recMu.Unlock()
}

// endRecording stops recording and returns what was recorded. Called with
// applyMu held, so no event is applied between the end of the recording
// and the import of the snapshot.
func (r *replica) endRecording() map[instKey][][]byte {
	r.recMu.Lock()
	defer r.recMu.Unlock()
	rec := r.recording
	r.recording = nil
	return rec
}

// record keeps one event of instance k (data may be retained, see
// cluster.Handlers.OnEvents). Called with applyMu held.
func (r *replica) record(rec map[instKey][][]byte, k instKey, data []byte) {
	if r.remoteOf(k) {
		rec[k] = append(rec[k], data)
	}
}

// remoteOf reports whether k does not report to this replica.
func (r *replica) remoteOf(k instKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.local[k] == 0
}

// Snapshot gaps (replica.expect).
const (
	maxGapPulls   = 3
	gapPullsDelay = 100 * time.Millisecond
)

// checkGap checks the first event of an instance imported from the latest
// snapshot, numbered seq, against the snapshot's report of it. Called with
// applyMu held.
func (r *replica) checkGap(k instKey, seq uint64) {
	s, ok := r.expect[k]
	if !ok {
		return
	}
	delete(r.expect, k)
	if seq > s+1 {
		r.gap(k, s, seq)
	}
}

// gap asks for the snapshot again, a little later, when the peer's
// snapshot predates events that never reached this replica: reports s+1 to
// seq-1 of instance k. A Reporter numbers its reports one by one; a client
// that skips numbers costs at most maxGapPulls extra snapshots.
func (r *replica) gap(k instKey, s, seq uint64) {
	if n := r.gapPulls.Add(1); n > maxGapPulls {
		return
	}
	r.s.log.Info("the peer's snapshot predates reports this replica missed; asking for a snapshot again",
		"pool", k.pool, "instance", k.instance, "snapshot_seq", s, "first_seq", seq)
	time.AfterFunc(gapPullsDelay, r.wantSnapshot)
}

// replay applies again the recorded events of instance k just imported
// from a snapshot whose report of it had sequence number seq: those after
// the last recorded report the snapshot includes (sequence number <= seq;
// a Reporter's numbers grow across its streams), in arrival order. The
// snapshot predates them, and importing it undid them. The first report
// after those the snapshot includes, replayed here or still to come, is
// checked for a gap (checkGap). Called with applyMu held.
func (r *replica) replay(p *state.Pool, now time.Time, k instKey, seq uint64, events [][]byte) {
	from := 0
	var ev pb.ClusterEvent
	for i, data := range events {
		if proto.Unmarshal(data, &ev) == nil {
			if e, ok := ev.Event.(*pb.ClusterEvent_Report); ok && e.Report.GetSeq() <= seq {
				from = i + 1
			}
		}
	}
	r.expect[k] = seq
	for _, data := range events[from:] {
		if proto.Unmarshal(data, &ev) != nil {
			continue
		}
		switch e := ev.Event.(type) {
		case *pb.ClusterEvent_Report:
			r.checkGap(k, e.Report.GetSeq())
			if err := r.applyReport(p, now, e.Report); err != nil {
				r.s.log.Warn("cluster event not applied again after the snapshot", "pool", p.Name(), "error", err)
			}
		case *pb.ClusterEvent_Closed:
			r.applyClosed(p.Name(), now, e.Closed.GetInstanceId())
		}
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
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.SnapshotTimeout+4*r.cfg.ApplyTimeout)
	defer cancel()
	start := time.Now()
	r.beginRecording() // before the request: the peer's view may predate what arrives from now on
	data, origin, err := l.RequestSnapshot(ctx, allPools)
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	rec := r.endRecording()
	clear(r.expect)
	if err != nil {
		r.retrySnapshot(err)
		return
	}
	var snap pb.PoolSnapshots
	if err := proto.Unmarshal(data, &snap); err != nil {
		r.s.log.Warn("snapshot malformed", "origin", origin, "error", err)
		r.retrySnapshot(err)
		return
	}
	r.pullRetries.Store(0)
	now := r.s.opts.Now()
	n, replayed := 0, 0
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
			k := instKey{p.Name(), is.GetLast().GetInstanceId()}
			if r.remoteOf(k) {
				r.replay(p, now, k, is.GetLast().GetSeq(), rec[k])
				replayed += len(rec[k])
			}
		}
	}
	r.s.log.Info("snapshot applied", "origin", origin, "pools", len(snap.GetPools()), "instances", n,
		"bytes", len(data), "took", time.Since(start).Round(time.Millisecond), "events_recorded", replayed)
}

// Snapshot retries (replica.pullRetries).
const (
	maxSnapshotRetries = 5
	snapshotRetryBase  = 250 * time.Millisecond
)

// retrySnapshot asks for the snapshot again, backing off, after a request
// failed with err: a peer too busy to answer within SnapshotTimeout (a large
// view to export) must not leave this replica without the other
// replicas' instances' caches, which their reports do not resend. The
// first replica of a cluster, which has heard from no other, has no peer
// to wait for.
func (r *replica) retrySnapshot(err error) {
	if errors.Is(err, cluster.ErrNoPeers) && r.applied.Load() == 0 {
		r.s.log.Info("no peer answered the snapshot request: this replica starts from its own reports")
		return
	}
	n := r.pullRetries.Add(1)
	if n > maxSnapshotRetries {
		r.s.log.Error("snapshot request failed again; giving up until the link reconnects: the caches of instances reporting to other replicas are missing here",
			"attempts", n, "error", err)
		return
	}
	d := min(snapshotRetryBase<<(n-1), r.cfg.ApplyTimeout)
	r.s.log.Warn("snapshot request failed; asking again", "attempt", n, "in", d, "error", err)
	time.AfterFunc(d, r.wantSnapshot)
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
		err = r.s.mirror(pool, value, revision, fmt.Sprintf("cluster bucket %s revision %d", r.cfg.Bucket, revision))
	}
	if err != nil {
		r.s.log.Error("cluster configuration not applied", "key", key, "revision", revision, "error", err)
	}
}
