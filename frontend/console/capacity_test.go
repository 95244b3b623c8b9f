package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/console"
	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// capacityJSON gets GET /ui/api/capacity?pool=P and returns its body with
// every oldest_wait_ms, once checked to be in [0, maxMs], set to 0 (a wait
// on the wall clock) and counters.requeued set to 0 (how often a waiting
// pick's retry found the pool still saturated depends on when reports
// came), re-encoded with sorted keys; and the decoded body.
func capacityJSON(t *testing.T, addr, pool string, maxMs float64) (string, map[string]any) {
	t.Helper()
	a := call(t, addr, "GET", "/ui/api/capacity?pool="+pool, "", nil)
	if a.status != 200 {
		t.Fatalf("capacity of %s: %d %s: %s", pool, a.status, a.code, a.error)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("capacity of %s: %v in %s", pool, err, a.body)
	}
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				if ms, ok := e.(float64); ok && k == "oldest_wait_ms" {
					if ms < 0 || ms > maxMs {
						t.Errorf("capacity of %s: oldest_wait_ms %v, want 0 to %v ms", pool, ms, maxMs)
					}
					x[k] = 0.0
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v["queue"])
	if c, ok := v["queue"].(map[string]any)["counters"].(map[string]any); ok {
		c["requeued"] = 0.0
	}
	b, err := json.Marshal(v["queue"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b), v
}

// compact is the JSON s re-encoded with sorted keys, no spaces.
func compact(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConsoleCapacity: GET /ui/api/capacity serves GetSloCalibration's
// fit once outcomes taught it (version 1, 64 samples, in use, a prefill
// scale moved from 1 toward the truth's 2); the waiting room exactly: off with the default limits,
// then while picks wait its bands (priority 5 first), its flows (most
// waiting first, MaxFlowsPerBand of a band's 11), the oldest waits, and
// the canceled picks by reason once they leave; bad input is a precise
// 400/404; and the pool page carries each instance's prefill/decode role.
func TestConsoleCapacity(t *testing.T) {
	sc := servertest.Start(t, servertest.RealClock())
	addr := sc.HTTPAddr()
	calibrate(t, sc)
	a := call(t, addr, "GET", "/ui/api/capacity?pool=learn", "", nil)
	var got struct{ Calibration json.RawMessage }
	if err := json.Unmarshal([]byte(a.body), &got); err != nil || a.status != 200 {
		t.Fatalf("capacity of learn: %d %v: %s", a.status, err, a.body)
	}
	want, err := sc.Admin.GetSloCalibration(context.Background(), &pb.GetSloCalibrationRequest{Pool: "learn"})
	if err != nil {
		t.Fatal(err)
	}
	if g, w := compact(t, string(got.Calibration)), compact(t, protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Format(want)); g != w {
		t.Errorf("calibration of learn:\n got %s\nwant %s (GetSloCalibration)", g, w)
	}
	d := want.GetDeployments()
	if len(d) != 1 || d[0].GetDeployment() != "fit" || d[0].GetVersion() != 1 || d[0].GetAccepted() != calib.MinSamples || !d[0].GetInUse() ||
		d[0].GetPrefillScale() < 1.1 || d[0].GetPrefillScale() > 2.5 || want.GetCalibration() != pb.SloCalibration_SLO_CALIBRATION_APPLY {
		t.Errorf("fit %v, want deployment fit at version 1, %d samples, in use, a prefill scale moved from the prior's 1 toward 2 (TTFTs were twice the prior's; each late sample pulls by at most calib.LateClip)", want, calib.MinSamples)
	}
	off := `{"active":false,"bands":[],"counters":{"dispatched":0,"enqueued":0,"passed":0,"requeued":0},"max_per_band":1000,"max_waiting":1000,` +
		`"oldest_wait_ms":0,"on_saturation":"ON_SATURATION_LEAST_LOADED","rejected":{"canceled":0,"queue_full":0,"queue_timeout":0,"sheddable_rejected":0},` +
		`"ttl_ms":30000,"waiting":0}`
	if q, _ := capacityJSON(t, addr, "learn", 0); q != off {
		t.Errorf("queue of a least_loaded pool:\n got %s\nwant %s", q, off)
	}

	start := time.Now()
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("t%02d", i)
	}
	release := waiters(t, sc, map[int32][]string{5: {"gold", "gold", "silver"}, 1: eleven, 0: {"default"}})
	servertest.EventuallyOK(t, func() string {
		if _, v := capacityJSON(t, addr, "busy", 1e9); v["queue"].(map[string]any)["waiting"] != 15.0 {
			return fmt.Sprintf("%v picks waiting, want 15", v["queue"].(map[string]any)["waiting"])
		}
		return ""
	})
	// A pick holding a grant (its retry under way) is not waiting: compare
	// until a moment when all 15 wait.
	servertest.EventuallyOK(t, func() string {
		q, v := capacityJSON(t, addr, "busy", float64(time.Since(start).Milliseconds()))
		bands := v["queue"].(map[string]any)["bands"].([]any)
		if len(bands) != 3 {
			return "bands: " + q
		}
		top := bands[1].(map[string]any)["top_flows"].([]any)
		if len(top) != console.MaxFlowsPerBand {
			return fmt.Sprintf("band 1 lists %d of its 11 flows, want %d", len(top), console.MaxFlowsPerBand)
		}
		flow := `{"flow":"%s","oldest_wait_ms":0,"waiting":1}`
		ones := make([]string, 0, len(top))
		for _, f := range top {
			ones = append(ones, fmt.Sprintf(flow, f.(map[string]any)["flow"]))
		}
		busy := `{"active":true,"bands":[` +
			`{"flows":2,"oldest_wait_ms":0,"priority":5,"top_flows":[{"flow":"gold","oldest_wait_ms":0,"waiting":2},` + fmt.Sprintf(flow, "silver") + `],"waiting":3},` +
			`{"flows":11,"oldest_wait_ms":0,"priority":1,"top_flows":[` + strings.Join(ones, ",") + `],"waiting":11},` +
			`{"flows":1,"oldest_wait_ms":0,"priority":0,"top_flows":[` + fmt.Sprintf(flow, "default") + `],"waiting":1}],` +
			`"counters":{"dispatched":0,"enqueued":15,"passed":0,"requeued":0},"max_per_band":20,"max_waiting":40,"oldest_wait_ms":0,` +
			`"on_saturation":"ON_SATURATION_QUEUE","rejected":{"canceled":0,"queue_full":0,"queue_timeout":0,"sheddable_rejected":0},"ttl_ms":60000,"waiting":15}`
		if q != busy {
			return fmt.Sprintf("queue while 15 picks wait:\n got %s\nwant %s", q, busy)
		}
		return ""
	})
	release() // the clients return at once; the router sees the cancels a moment later
	servertest.EventuallyOK(t, func() string {
		if q, _ := capacityJSON(t, addr, "busy", float64(time.Since(start).Milliseconds())); !strings.Contains(q, `"rejected":{"canceled":15,`) || !strings.Contains(q, `"waiting":0}`) {
			return "after the callers canceled: " + q
		}
		return ""
	})

	reportAs(t, sc, "pd", "d", "p-1", pb.PdRole_PD_ROLE_PREFILL, 0)
	reportAs(t, sc, "pd", "d", "d-1", pb.PdRole_PD_ROLE_DECODE, 0)
	waitInstances(t, sc, "pd", 2)
	checkCases(t, addr, []apiCase{
		{"capacity without pool", "GET", "/ui/api/capacity", "", nil, 400, "query pool is required"},
		{"capacity of an unknown pool", "GET", "/ui/api/capacity?pool=nope", "", nil, 404, `"nope"`},
		{"capacity pool twice", "GET", "/ui/api/capacity?pool=a&pool=b", "", nil, 400, "query pool is given 2 times"},
		{"capacity pool too long", "GET", "/ui/api/capacity?pool=" + strings.Repeat("p", console.MaxQueryBytes+1), "", nil, 400, "the limit is 256"},
		{"capacity by POST", "POST", "/ui/api/capacity?pool=learn", "{}", nil, 404, "no console endpoint POST /ui/api/capacity"},
		{"prefill role", "GET", "/ui/api/pool?pool=pd&history=0", "", nil, 200, `"role":"PD_ROLE_PREFILL"`},
		{"decode role", "GET", "/ui/api/pool?pool=pd&history=0", "", nil, 200, `"role":"PD_ROLE_DECODE"`},
		{"capacity script", "GET", "/ui/capacity.js", "", nil, 200, "const pageCapacity"},
		{"page loads it", "GET", "/ui/", "", nil, 200, `<script src="capacity.js" defer>`},
	})
}
