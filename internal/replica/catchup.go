package replica

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/state"
)

// catchUpState is the state of the snapshot catch-up (the package doc,
// "Catch-up", steps 1 to 4).
type catchUpState struct {
	// applyMu serializes applying other replicas' events with importing
	// a snapshot. Guards expect.
	applyMu sync.Mutex
	// recording holds the raw events of remote instances, in arrival
	// order, while a snapshot is pulled (step 1); nil when nothing is
	// recorded. Guarded by recMu; ended under applyMu too.
	recMu     sync.Mutex
	recording map[instKey][][]byte
	// expect holds, for instances imported from the latest snapshot and
	// not heard of since, the sequence number of the report the snapshot
	// had (step 3).
	expect map[instKey]uint64
	// gapPulls counts the snapshots asked again for a gap (step 3), and
	// pullRetries the failed snapshot requests (step 4), of this catch-up.
	gapPulls    atomic.Int32
	pullRetries atomic.Int32
}

// Limits of one catch-up (package doc, steps 3 and 4).
const (
	maxGapPulls        = 3
	gapPullsDelay      = 100 * time.Millisecond
	maxSnapshotRetries = 5
	snapshotRetryBase  = 250 * time.Millisecond
)

// beginCatchUp starts a catch-up: events are recorded from now on, and the
// gap and retry budgets are full again.
func (r *Replica) beginCatchUp() {
	r.beginRecording()
	r.cu.gapPulls.Store(0)
	r.cu.pullRetries.Store(0)
}

// beginRecording starts recording remote instances' events for the
// snapshot to come (a no-op when already recording).
func (r *Replica) beginRecording() {
	r.cu.recMu.Lock()
	if r.cu.recording == nil {
		r.cu.recording = make(map[instKey][][]byte)
	}
	r.cu.recMu.Unlock()
}

// recorded returns the recording in progress, nil when none is.
func (r *Replica) recorded() map[instKey][][]byte {
	r.cu.recMu.Lock()
	defer r.cu.recMu.Unlock()
	return r.cu.recording
}

// endRecording stops recording and returns what was recorded. Called with
// applyMu held, so no event is applied between the end of the recording
// and the import of the snapshot.
func (r *Replica) endRecording() map[instKey][][]byte {
	r.cu.recMu.Lock()
	defer r.cu.recMu.Unlock()
	rec := r.cu.recording
	r.cu.recording = nil
	return rec
}

// record keeps one event of instance k (data may be retained, see
// cluster.Handlers.OnEvents). Called with applyMu held.
func (r *Replica) record(rec map[instKey][][]byte, k instKey, data []byte) {
	if r.remoteOf(k) {
		rec[k] = append(rec[k], data)
	}
}

// checkGap checks the first event of an instance imported from the latest
// snapshot, numbered seq, against the snapshot's report of it. Called with
// applyMu held.
func (r *Replica) checkGap(k instKey, seq uint64) {
	s, ok := r.cu.expect[k]
	if !ok {
		return
	}
	delete(r.cu.expect, k)
	if seq > s+1 {
		r.gap(k, s, seq)
	}
}

// gap asks for the snapshot again, a little later, when the peer's
// snapshot predates events that never reached this replica: reports s+1 to
// seq-1 of instance k. A Reporter numbers its reports one by one; a client
// that skips numbers costs at most maxGapPulls extra snapshots.
func (r *Replica) gap(k instKey, s, seq uint64) {
	if n := r.cu.gapPulls.Add(1); n > maxGapPulls {
		return
	}
	r.log.Info("the peer's snapshot predates reports this replica missed; asking for a snapshot again",
		"pool", k.pool, "instance", k.instance, "snapshot_seq", s, "first_seq", seq)
	time.AfterFunc(gapPullsDelay, r.wantCatchUp)
}

// replay applies again the recorded events of instance k just imported
// from a snapshot whose report of it had sequence number seq: those after
// the last recorded report the snapshot includes (sequence number <= seq;
// a Reporter's numbers grow across its streams), in arrival order. The
// snapshot predates them, and importing it undid them. The first report
// after those the snapshot includes, replayed here or still to come, is
// checked for a gap (checkGap). Called with applyMu held.
func (r *Replica) replay(p *state.Pool, now time.Time, k instKey, seq uint64, events [][]byte) {
	from := 0
	var ev pb.ClusterEvent
	for i, data := range events {
		if proto.Unmarshal(data, &ev) == nil {
			if e, ok := ev.Event.(*pb.ClusterEvent_Report); ok && e.Report.GetSeq() <= seq {
				from = i + 1
			}
		}
	}
	r.cu.expect[k] = seq
	for _, data := range events[from:] {
		if proto.Unmarshal(data, &ev) != nil {
			continue
		}
		switch e := ev.Event.(type) {
		case *pb.ClusterEvent_Report:
			r.checkGap(k, e.Report.GetSeq())
			if err := r.applyReport(p, now, e.Report); err != nil {
				r.log.Warn("cluster event not applied again after the snapshot", "pool", p.Name(), "error", err)
			}
		case *pb.ClusterEvent_Closed:
			r.applyClosed(p.Name(), now, e.Closed.GetInstanceId())
		}
	}
}

// retrySnapshot asks for the snapshot again, backing off, after a request
// failed with err: a peer too busy to answer within SnapshotTimeout (a large
// view to export) must not leave this replica without the other
// replicas' instances' caches, which their reports do not resend. The
// first replica of a cluster, which has heard from no other, has no peer
// to wait for.
func (r *Replica) retrySnapshot(err error) {
	if errors.Is(err, cluster.ErrNoPeers) && r.applied.Load() == 0 {
		r.log.Info("no peer answered the snapshot request: this replica starts from its own reports")
		return
	}
	n := r.cu.pullRetries.Add(1)
	if n > maxSnapshotRetries {
		r.log.Error("snapshot request failed again; giving up until the link reconnects: the caches of instances reporting to other replicas are missing here",
			"attempts", n, "error", err)
		return
	}
	d := min(snapshotRetryBase<<(n-1), r.cfg.ApplyTimeout)
	r.log.Warn("snapshot request failed; asking again", "attempt", n, "in", d, "error", err)
	time.AfterFunc(d, r.wantCatchUp)
}
