package console

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
)

// The console's JSON endpoints. Each authorizes the request as the gRPC
// method it calls (console.authorize) and renders the method's response
// with protojson (proto field names; 64-bit integers as strings), so a
// field means what the API reference says.

var pj = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// raw renders m for embedding in a JSON answer.
func raw(m proto.Message) json.RawMessage {
	b, err := pj.Marshal(m)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

// answer writes m as the JSON answer, or err's status when err is set: the
// tail of every handler that answers one gRPC response.
func answer(w http.ResponseWriter, m proto.Message, err error) {
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, raw(m))
}

// poolOverview is one pool of GET /ui/api/pools.
type poolOverview struct {
	Summary json.RawMessage `json:"summary"`         // PoolSummary
	Weights json.RawMessage `json:"weights"`         // GetWeightsResponse, null past MaxOverviewPools
	States  map[string]int  `json:"instance_states"` // instances by state: ok, stale, draining, disconnected
}

// pools is GET /ui/api/pools: every pool with its deployments, instance
// counts by state, weights version and ramp.
func (c *console) pools(w http.ResponseWriter, r *http.Request) {
	ctx, err := c.authorize(r, pb.AdminService_ListPools_FullMethodName)
	if err != nil {
		fail(w, err)
		return
	}
	ps, err := c.b.Admin().ListPools(ctx, &pb.ListPoolsRequest{})
	if err != nil {
		fail(w, err)
		return
	}
	out := struct {
		Pools     []poolOverview `json:"pools"`
		Truncated bool           `json:"truncated"`
		Now       int64          `json:"now_ms"`
	}{Pools: []poolOverview{}, Now: time.Now().UnixMilli()}
	for i, p := range ps.GetPools() {
		o := poolOverview{Summary: raw(p), Weights: json.RawMessage(`null`)}
		if i < MaxOverviewPools {
			wr, werr := c.weights(r, p.GetPool())
			ir, ierr := c.instances(r, p.GetPool())
			if werr != nil || ierr != nil { // the pool went away, or no read access: show what we have
				out.Pools = append(out.Pools, o)
				continue
			}
			o.Weights, o.States = raw(wr), statesOf(ir)
		} else {
			out.Truncated = true
		}
		out.Pools = append(out.Pools, o)
	}
	writeJSON(w, out)
}

func statesOf(ir *pb.ListInstancesResponse) map[string]int {
	st := map[string]int{"ok": 0, "stale": 0, "draining": 0, "disconnected": 0, "unreachable": 0}
	for _, in := range ir.GetInstances() {
		st[stateName(in.GetState())]++
	}
	return st
}

func stateName(s pb.InstanceState) string {
	switch s {
	case pb.InstanceState_INSTANCE_STATE_OK:
		return "ok"
	case pb.InstanceState_INSTANCE_STATE_STALE:
		return "stale"
	case pb.InstanceState_INSTANCE_STATE_DRAINING:
		return "draining"
	case pb.InstanceState_INSTANCE_STATE_DISCONNECTED:
		return "disconnected"
	case pb.InstanceState_INSTANCE_STATE_UNREACHABLE:
		return "unreachable"
	}
	return "unknown"
}

func (c *console) weights(r *http.Request, pool string) (*pb.GetWeightsResponse, error) {
	ctx, err := c.authorize(r, pb.AdminService_GetWeights_FullMethodName)
	if err != nil {
		return nil, err
	}
	return c.b.Admin().GetWeights(ctx, &pb.GetWeightsRequest{Pool: pool})
}

func (c *console) instances(r *http.Request, pool string) (*pb.ListInstancesResponse, error) {
	ctx, err := c.authorize(r, pb.AdminService_ListInstances_FullMethodName)
	if err != nil {
		return nil, err
	}
	return c.b.Admin().ListInstances(ctx, &pb.ListInstancesRequest{Pool: pool})
}

// pool is GET /ui/api/pool?pool=P[&history=0]: the pool's weights and ramp
// (GetWeights), instances (ListInstances) with each one's picks/s, and,
// unless history=0, its ring (History). The ring needs the GetWeights
// rule (operator-read): it is the same figures over time.
func (c *console) pool(w http.ResponseWriter, r *http.Request) {
	name, err := query(r, "pool", true)
	if err != nil {
		fail(w, err)
		return
	}
	hq, err := query(r, "history", false)
	if err != nil {
		fail(w, err)
		return
	}
	if hq != "" && hq != "0" && hq != "1" {
		fail(w, badf("query history is %q; want 0 or 1", hq))
		return
	}
	wr, err := c.weights(r, name)
	if err != nil {
		fail(w, err)
		return
	}
	ir, err := c.instances(r, name)
	if err != nil {
		fail(w, err)
		return
	}
	h, tracked := c.b.History(name)
	out := struct {
		Pool      string             `json:"pool"`
		Weights   json.RawMessage    `json:"weights"`
		Instances json.RawMessage    `json:"instances"`
		Picks     map[string]float64 `json:"instance_picks_per_second"`
		History   *frontend.History  `json:"history"` // null with history=0 or an untracked pool
		Tracked   bool               `json:"tracked"`
		Now       int64              `json:"now_ms"`
	}{Pool: name, Weights: raw(wr), Instances: raw(ir), Picks: h.InstancePicks, Tracked: tracked, Now: time.Now().UnixMilli()}
	if out.Picks == nil {
		out.Picks = map[string]float64{}
	}
	if tracked && hq != "0" {
		out.History = &h
	}
	writeJSON(w, out)
}

// migration is GET /ui/api/migration?pool=P&from=A&to=B[&top_k=N]:
// GetMigrationStatus.
func (c *console) migration(w http.ResponseWriter, r *http.Request) {
	var q [4]string
	for i, n := range []string{"pool", "from", "to", "top_k"} {
		v, err := query(r, n, i < 3)
		if err != nil {
			fail(w, err)
			return
		}
		q[i] = v
	}
	topK := uint64(10)
	if q[3] != "" {
		var err error
		if topK, err = strconv.ParseUint(q[3], 10, 32); err != nil {
			fail(w, badf("query top_k is %q; want a whole number", q[3]))
			return
		}
	}
	ctx, err := c.authorize(r, pb.AdminService_GetMigrationStatus_FullMethodName)
	if err != nil {
		fail(w, err)
		return
	}
	st, err := c.b.Admin().GetMigrationStatus(ctx, &pb.GetMigrationStatusRequest{Pool: q[0], From: q[1], To: q[2], TopK: uint32(topK)})
	answer(w, st, err)
}

// setWeights is POST /ui/api/weights {"pool", "weights", "expected_version",
// "allow_drain", "allow_new_pool"}: SetWeights. A pool the router does not
// know is 404 unless allow_new_pool.
func (c *console) setWeights(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Pool            string             `json:"pool"`
		Weights         map[string]float64 `json:"weights"`
		ExpectedVersion uint64             `json:"expected_version"`
		AllowDrain      bool               `json:"allow_drain"`
		AllowNewPool    bool               `json:"allow_new_pool"`
	}
	if err := decode(r, &in); err != nil {
		fail(w, err)
		return
	}
	ctx, err := c.authorize(r, pb.AdminService_SetWeights_FullMethodName)
	if err != nil {
		fail(w, err)
		return
	}
	resp, err := c.b.Admin().SetWeights(ctx, &pb.SetWeightsRequest{Pool: in.Pool, Weights: in.Weights, ExpectedVersion: in.ExpectedVersion,
		AllowDrain: in.AllowDrain, AllowNewPool: in.AllowNewPool})
	answer(w, resp, err)
}

// startRamp is POST /ui/api/ramp/start {"pool", "target", "duration",
// "step_interval", "min_headroom_pct", "expected_version", "allow_drain",
// "allow_new_pool"}: a linear StartRamp. Durations are Go durations ("10m",
// "30s").
func (c *console) startRamp(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Pool            string             `json:"pool"`
		Target          map[string]float64 `json:"target"`
		Duration        string             `json:"duration"`
		StepInterval    string             `json:"step_interval"`
		MinHeadroomPct  float64            `json:"min_headroom_pct"`
		ExpectedVersion uint64             `json:"expected_version"`
		AllowDrain      bool               `json:"allow_drain"`
		AllowNewPool    bool               `json:"allow_new_pool"`
	}
	if err := decode(r, &in); err != nil {
		fail(w, err)
		return
	}
	d, err := parseDuration("duration", in.Duration)
	if err != nil {
		fail(w, err)
		return
	}
	iv, err := parseDuration("step_interval", in.StepInterval)
	if err != nil {
		fail(w, err)
		return
	}
	req := &pb.StartRampRequest{Pool: in.Pool, Target: in.Target, Duration: durationpb.New(d), StepInterval: durationpb.New(iv),
		ExpectedVersion: in.ExpectedVersion, AllowDrain: in.AllowDrain, AllowNewPool: in.AllowNewPool}
	if in.MinHeadroomPct != 0 {
		req.AutoHold = &pb.AutoHold{MinHeadroomPct: in.MinHeadroomPct}
	}
	ctx, err := c.authorize(r, pb.AdminService_StartRamp_FullMethodName)
	if err != nil {
		fail(w, err)
		return
	}
	resp, err := c.b.Admin().StartRamp(ctx, req)
	answer(w, resp, err)
}

func parseDuration(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, badf("%s is required, e.g. \"10m\"", name)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, badf("%s is %q; want a positive duration such as \"30s\" or \"10m\"", name, s)
	}
	return d, nil
}

// updateRamp is POST /ui/api/ramp/{pause,resume,abort} {"pool", "ramp_id"}.
func (c *console) updateRamp(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Pool   string `json:"pool"`
		RampID uint64 `json:"ramp_id"`
	}
	op := r.PathValue("op")
	method := map[string]string{"pause": pb.AdminService_PauseRamp_FullMethodName,
		"resume": pb.AdminService_ResumeRamp_FullMethodName, "abort": pb.AdminService_AbortRamp_FullMethodName}[op]
	if method == "" {
		writeError(w, http.StatusNotFound, "NotFound", "no ramp operation "+strconv.Quote(op)+"; want start, pause, resume or abort")
		return
	}
	if err := decode(r, &in); err != nil {
		fail(w, err)
		return
	}
	ctx, err := c.authorize(r, method)
	if err != nil {
		fail(w, err)
		return
	}
	a := c.b.Admin()
	var resp proto.Message
	switch op {
	case "pause":
		resp, err = a.PauseRamp(ctx, &pb.PauseRampRequest{Pool: in.Pool, RampId: in.RampID})
	case "resume":
		resp, err = a.ResumeRamp(ctx, &pb.ResumeRampRequest{Pool: in.Pool, RampId: in.RampID})
	default:
		resp, err = a.AbortRamp(ctx, &pb.AbortRampRequest{Pool: in.Pool, RampId: in.RampID})
	}
	answer(w, resp, err)
}
