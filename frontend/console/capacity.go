package console

import (
	"encoding/json"
	"net/http"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/flowq"
)

// The capacity page's endpoint: what the router learned of each
// deployment's prefill speed from outcomes (GetSloCalibration) and the
// pool's waiting room under on_saturation: queue (docs/flow-control.md).

// MaxFlowsPerBand is the most flows GET /ui/api/capacity lists per
// priority band of a waiting room (those with the most picks waiting); a
// band's "flows" still counts them all.
const MaxFlowsPerBand = 10

// queueFlow is one flow's waiting picks in one band.
type queueFlow struct {
	Flow         string `json:"flow"`
	Waiting      int    `json:"waiting"`        // picks waiting
	OldestWaitMs int64  `json:"oldest_wait_ms"` // how long its oldest pick has waited
}

// queueBand is one priority band of a waiting room.
type queueBand struct {
	Priority     int32       `json:"priority"`
	Waiting      int         `json:"waiting"`        // picks waiting in the band
	Flows        int         `json:"flows"`          // flows with a waiting pick in the band
	OldestWaitMs int64       `json:"oldest_wait_ms"` // how long its oldest pick has waited
	TopFlows     []queueFlow `json:"top_flows"`      // at most MaxFlowsPerBand, most picks waiting first
}

// queueView is a pool's waiting room: its policy limits, its bands and
// its counters since the router started.
type queueView struct {
	// OnSaturation is the policy's on_saturation ("ON_SATURATION_QUEUE"
	// turns the waiting room on).
	OnSaturation string `json:"on_saturation"`
	MaxWaiting   uint32 `json:"max_waiting"`  // queue_max_waiting, picks
	MaxPerBand   uint32 `json:"max_per_band"` // queue_max_per_band, picks
	TTLMs        int64  `json:"ttl_ms"`       // queue_ttl, ms
	// Active is true once a pick of the pool has waited since the router
	// started.
	Active       bool        `json:"active"`
	Waiting      int         `json:"waiting"`        // picks waiting, all bands
	OldestWaitMs int64       `json:"oldest_wait_ms"` // the longest wait now, 0 when none waits
	Bands        []queueBand `json:"bands"`          // non-empty bands, highest priority first
	// Counters are flowq.Stats since the router started: picks that
	// waited (enqueued), left with an instance (dispatched), went back
	// after a retry found the pool still saturated (requeued), or whose
	// retry failed otherwise (passed).
	Counters map[string]uint64 `json:"counters"`
	// Rejected counts the picks that left without an instance, by the
	// reason the pick's error carries (flowq.Reason).
	Rejected map[string]uint64 `json:"rejected"`
}

// capacity is GET /ui/api/capacity?pool=P: the pool's calibration
// (GetSloCalibration, operator-read) and its waiting room (the policy's
// limits from GetPolicy, operator-read, and Backend.FlowQueue).
func (c *console) capacity(w http.ResponseWriter, r *http.Request) {
	name, err := query(r, "pool", true)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, err := c.authorize(r, pb.AdminService_GetSloCalibration_FullMethodName)
	if err != nil {
		fail(w, err)
		return
	}
	cal, err := c.b.Admin().GetSloCalibration(ctx, &pb.GetSloCalibrationRequest{Pool: name})
	if err != nil {
		fail(w, err)
		return
	}
	ctx, err = c.authorize(r, pb.AdminService_GetPolicy_FullMethodName)
	if err != nil {
		fail(w, err)
		return
	}
	pol, err := c.b.Admin().GetPolicy(ctx, &pb.GetPolicyRequest{Pool: name})
	if err != nil {
		fail(w, err)
		return
	}
	pq, active := c.b.FlowQueue(name, MaxFlowsPerBand)
	writeJSON(w, struct {
		Pool        string          `json:"pool"`
		Calibration json.RawMessage `json:"calibration"` // GetSloCalibrationResponse
		Queue       queueView       `json:"queue"`
	}{Pool: name, Calibration: raw(cal), Queue: queueOf(pol.GetPolicy(), pq, active)})
}

// queueOf is the waiting room pq of a pool under policy p.
func queueOf(p *pb.Policy, pq flowq.PoolQueue, active bool) queueView {
	ms := func(since time.Time) int64 { return pq.At.Sub(since).Milliseconds() }
	v := queueView{OnSaturation: p.GetOnSaturation().String(), MaxWaiting: p.GetQueueMaxWaiting(), MaxPerBand: p.GetQueueMaxPerBand(),
		TTLMs: p.GetQueueTtl().AsDuration().Milliseconds(), Active: active, Bands: []queueBand{}}
	for _, b := range pq.Bands {
		qb := queueBand{Priority: b.Priority, Waiting: b.Waiting, Flows: b.Flows, OldestWaitMs: ms(b.Oldest), TopFlows: []queueFlow{}}
		for _, f := range pq.Flows {
			if f.Priority == b.Priority {
				qb.TopFlows = append(qb.TopFlows, queueFlow{Flow: f.Flow, Waiting: f.Waiting, OldestWaitMs: ms(f.Oldest)})
			}
		}
		v.Bands = append(v.Bands, qb)
		v.Waiting += b.Waiting
		v.OldestWaitMs = max(v.OldestWaitMs, qb.OldestWaitMs)
	}
	st := pq.Stats
	v.Counters = map[string]uint64{"enqueued": st.Enqueued, "dispatched": st.Dispatched, "requeued": st.Requeued, "passed": st.Passed}
	v.Rejected = map[string]uint64{flowq.ErrQueueFull.Error(): st.Full, flowq.ErrQueueTimeout.Error(): st.Timeout,
		flowq.ErrSheddable.Error(): st.Sheddable, flowq.ErrCanceled.Error(): st.Canceled}
	return v
}
