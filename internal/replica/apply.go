package replica

import (
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/state"
)

// onEvents applies a batch another replica published for pool
// (cluster.Handlers.OnEvents). An event that cannot be applied is logged,
// once, and the batch goes on.
func (r *Replica) onEvents(pool, origin string, sentAt time.Time, payloads [][]byte) {
	if pool == allPools { // requests for every pool: the resend requests of older replicas, ignored
		r.applied.Add(uint64(len(payloads)))
		return
	}
	p, err := r.h.Registry().Ensure(pool)
	if err != nil {
		r.log.Warn("cluster events dropped", "pool", pool, "origin", origin, "error", err)
		return
	}
	now := r.now()
	var ev pb.ClusterEvent
	freed := false
	defer func() { // after the unlock below
		if freed && r.freed != nil {
			r.freed(pool)
		}
	}()
	r.cu.applyMu.Lock()
	defer r.cu.applyMu.Unlock()
	rec := r.recorded()
	for _, data := range payloads {
		if err := proto.Unmarshal(data, &ev); err != nil {
			r.log.Warn("cluster event malformed", "pool", pool, "origin", origin, "error", err)
			continue
		}
		var err error // this event's: a failed one must not be reported again for the next
		switch e := ev.Event.(type) {
		case *pb.ClusterEvent_Report:
			err = r.applyReport(p, now, e.Report)
			freed = freed || err == nil
			if len(r.cu.expect) > 0 {
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
			p.Assign(e.Assigned.GetInstanceId(), e.Assigned.GetPrefillTokens(), e.Assigned.GetKvBlocks(), e.Assigned.GetBlockHashes())
		case *pb.ClusterEvent_Outcomes:
			p.ApplyOutcomes(now, outcomesOf(e.Outcomes))
			freed = true
		}
		if err != nil {
			r.log.Warn("cluster event not applied", "pool", pool, "origin", origin, "error", err)
		}
		r.applied.Add(1)
	}
}

// remoteOf reports whether k does not report to this replica.
func (r *Replica) remoteOf(k instKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.local[k] == 0
}

// session returns the remote session of an instance of pool p, connecting
// it when needed; nil when the instance reports to this replica.
func (r *Replica) session(p *state.Pool, now time.Time, id state.Identity) (*state.Session, error) {
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

// applyReport applies another replica's report m to the instance's remote
// session in p; a no-op for an instance reporting here.
func (r *Replica) applyReport(p *state.Pool, now time.Time, m *pb.ReportLoadRequest) error {
	id := state.Identity{Pool: m.GetPool(), Deployment: m.GetDeployment(), Instance: m.GetInstanceId(), Address: m.GetAddress()}
	reg := r.h.Registry()
	if err := reg.ValidateIdentity(id); err != nil {
		return err
	}
	var rep state.Report
	if err := protoconv.ReportOf(reg, m, &rep); err != nil {
		return err
	}
	s, err := r.session(p, now, id)
	if s == nil || err != nil {
		return err
	}
	return s.Report(now, &rep)
}

// applyClosed closes the remote session of an instance whose stream on
// another replica ended.
func (r *Replica) applyClosed(pool string, now time.Time, instance string) {
	k := instKey{pool, instance}
	r.mu.Lock()
	s := r.remote[k]
	delete(r.remote, k)
	r.mu.Unlock()
	if s != nil {
		s.Close(now)
	}
}

// outcomesOf turns another replica's reachability outcomes into the
// state's. Applied here, they are not published again.
func outcomesOf(ev *pb.InstanceOutcomes) []state.Outcome {
	outs := make([]state.Outcome, 0, len(ev.GetConnectFailed())+len(ev.GetServed()))
	for _, id := range ev.GetConnectFailed() {
		outs = append(outs, state.Outcome{Instance: id, Kind: state.OutcomeConnectFailed})
	}
	for _, id := range ev.GetServed() {
		outs = append(outs, state.Outcome{Instance: id, Kind: state.OutcomeServed})
	}
	return outs
}
