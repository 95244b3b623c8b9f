package sim

import (
	"strings"
	"testing"
	"time"
)

// pdTinyYAML is one prefill and one decode instance with exact timings:
// no attention term, 16-token blocks; DECIDER, SLOTS are spliced in.
const pdTinyYAML = `
name: pd-tiny
seed: 3
duration: 10s
block_tokens: 16
report_interval: 50ms
cache_events: true
deployments:
  - {name: main, instances: 2, prefill_tokens_per_second: 10000, batch_overhead: 5ms, kv_blocks: 10000,
     decode_per_token: 10ms, doubling_context_tokens: 0}
pd:
  prefill: {main: 1}
  decode: {main: 1}
  decode_prefill_tokens_per_second: 5000
  transfer_ms_per_token: 0.01
  decode_slots: SLOTS
  decode_interference: 1
  deciders: {v: DECIDER}
workload:
  rate: 1
  classes: [{name: c, share: 1, prefix_tokens: 16, suffix_tokens: 16, output_tokens: 1}]
variants: [{name: v}]
`

// pdList is a Workload of fixed requests.
type pdList struct{ reqs []*Request }

func (l *pdList) Next() (*Request, error) {
	if len(l.reqs) == 0 {
		return nil, nil
	}
	r := l.reqs[0]
	l.reqs = l.reqs[1:]
	return r, nil
}

// pdReqAt is a request arriving at ms with prompt tokens whose full
// 16-token blocks hash to base+1, base+2, ...; conversations share a base.
func pdReqAt(id uint64, ms int, prompt, output uint32, base uint64) *Request {
	r := &Request{ID: id, Arrival: time.Duration(ms) * time.Millisecond, PromptTokens: prompt, OutputTokens: output}
	for k := range uint64(prompt / 16) {
		r.Hashes = append(r.Hashes, base+k+1)
	}
	return r
}

// TestPDPhysics checks the disaggregated physics exactly: prefill batch
// (5 ms + tokens / throughput), KV transfer (0.01 ms a missing token),
// decode (10 ms a token), decode slots, and the stall a local prefill
// batch puts on the decodes running on its instance (κ = 1).
func TestPDPhysics(t *testing.T) {
	type want struct {
		prefill          string
		ttft, wait, tpot float64
		stall            float64
		transfer         uint32
	}
	cases := []struct {
		name, decider, slots string
		reqs                 []*Request
		want                 []want // by request id
		reasons              map[string]int
	}{
		// 5 ms + 1000/10k s on the prefill instance, then 1000 tokens × 0.01 ms.
		{"always remote", "always", "4", []*Request{pdReqAt(1, 0, 1000, 10, 0)},
			[]want{{"main-00", 115, 0, 10, 0, 1000}}, map[string]int{"disaggregated": 1}},
		// 5 ms + 1000/5k s on the decode instance.
		{"local", "local", "4", []*Request{pdReqAt(1, 0, 1000, 10, 0)},
			[]want{{"main-01", 205, 0, 10, 0, 0}}, map[string]int{"disaggregated": 1}},
		// Request 1 decodes from 37 ms (5 + 160/5k s) for 100 × 10 ms; request
		// 2's local batch at 100 ms runs 205 ms and stalls it by 205 ms
		// (TPOT 1205/100 ms); with one slot request 2 waits for its end at 1242 ms.
		{"interference, one slot", "local", "1",
			[]*Request{pdReqAt(1, 0, 160, 100, 0), pdReqAt(2, 100, 1000, 10, 1000)},
			[]want{{"main-01", 37, 0, 12.05, 205, 0}, {"main-01", 1142, 937, 10, 0, 0}},
			map[string]int{"below_threshold": 1, "disaggregated": 1}},
		{"interference, two slots", "local", "2",
			[]*Request{pdReqAt(1, 0, 160, 100, 0), pdReqAt(2, 100, 1000, 10, 1000)},
			[]want{{"main-01", 37, 0, 12.05, 205, 0}, {"main-01", 205, 0, 10, 0, 0}},
			map[string]int{"below_threshold": 1, "disaggregated": 1}},
		// Remote prefills never stall decodes: 21 ms + 1.6 ms; request 2 is
		// ready at 100 + 105 + 10 ms and waits for the slot until 1022.6 ms.
		{"always, no interference", "always", "1",
			[]*Request{pdReqAt(1, 0, 160, 100, 0), pdReqAt(2, 100, 1000, 10, 1000)},
			[]want{{"main-00", 22.6, 0, 10, 0, 160}, {"main-00", 922.6, 807.6, 10, 0, 1000}},
			map[string]int{"below_threshold": 1, "disaggregated": 1}},
		// The router: 160 tokens are below pd_min_uncached_tokens (512):
		// local; 1000 uncached tokens prefill faster on the prefill
		// instance (105 ms + 5 ms transfer by policy < 205 ms).
		{"router", "router", "4",
			[]*Request{pdReqAt(1, 0, 160, 100, 0), pdReqAt(2, 100, 1000, 10, 1000)},
			[]want{{"main-01", 37, 0, 10, 0, 0}, {"main-00", 115, 0, 10, 0, 1000}},
			map[string]int{"below_threshold": 1, "disaggregated": 1}},
		// A follow-up turn of 1100 tokens, 992 cached on the decode instance
		// after request 1's transfer: 108 uncached. Dynamo: 108 < 2048 and
		// < 0.7 × 1100, local (5 ms + 108/5k s); llm-d: 108 ≥ 16, remote
		// (5 ms + 108/10k s on the prefill instance, which cached request 1,
		// + 1.08 ms); the router: 108 < 512, local.
		{"dynamo keeps a cached turn local", "dynamo", "4",
			[]*Request{pdReqAt(1, 0, 1000, 1, 0), pdReqAt(2, 2000, 1100, 1, 0)},
			[]want{{"main-00", 115, 0, 10, 0, 1000}, {"main-01", 26.6, 0, 10, 0, 0}},
			map[string]int{"disaggregated": 1, "below_threshold": 1}},
		{"llm-d disaggregates it", "llmd", "4",
			[]*Request{pdReqAt(1, 0, 1000, 1, 0), pdReqAt(2, 2000, 1100, 1, 0)},
			[]want{{"main-00", 115, 0, 10, 0, 1000}, {"main-00", 16.88, 0, 10, 0, 108}},
			map[string]int{"disaggregated": 1, "below_threshold": 1}},
		{"the router keeps it local", "router", "4",
			[]*Request{pdReqAt(1, 0, 1000, 1, 0), pdReqAt(2, 2000, 1100, 1, 0)},
			[]want{{"main-00", 115, 0, 10, 0, 1000}, {"main-01", 26.6, 0, 10, 0, 0}},
			map[string]int{"disaggregated": 1, "below_threshold": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			y := strings.NewReplacer("DECIDER", c.decider, "SLOTS", c.slots).Replace(pdTinyYAML)
			sc, err := ParsePDScenario([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			res, err := RunPD(sc, "v", RunOptions{Workload: &pdList{reqs: c.reqs}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Records) != len(c.want) {
				t.Fatalf("%d records, want %d", len(res.Records), len(c.want))
			}
			for _, rec := range res.Records {
				w := c.want[rec.ID-1]
				got := want{rec.Prefill, round3(rec.TTFTMs), round3(rec.SlotWaitMs), round3(rec.TPOTMs), round3(rec.StallMs), rec.Transfer}
				if got != w {
					t.Errorf("request %d: got %+v, want %+v", rec.ID, got, w)
				}
			}
			for k, n := range c.reasons {
				if res.Reasons[k] != n {
					t.Errorf("reasons %v, want %v", res.Reasons, c.reasons)
					break
				}
			}
		})
	}
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// TestPDMooncakeSeeded runs the first 60 s of pd-mooncake with seed 2
// under each decider: every variant sees the same 122 requests (after
// the warmup) and the same router decisions up to its own overrides'
// effects; the figures are exact for the seed (with the file's
// batch-dependent decode step, decode_ms_per_running 0.2, and the
// default pd_decode_running_ms 5 ms).
func TestPDMooncakeSeeded(t *testing.T) {
	sc, err := LoadPDScenario("testdata/pd-mooncake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		variant                        string
		requests, remote, routerRemote int
		reasons                        map[string]int
		p50, p99, stall                float64
	}{
		{"ours", 122, 84, 84, map[string]int{"below_threshold": 12, "disaggregated": 84, "local_cheaper": 26}, 705.87, 21264.963, 0.75},
		{"always", 122, 122, 80, map[string]int{"below_threshold": 13, "disaggregated": 80, "local_cheaper": 29}, 1281.049, 21274.792, 0},
		{"llm-d", 122, 122, 80, map[string]int{"below_threshold": 13, "disaggregated": 80, "local_cheaper": 29}, 1281.049, 21274.792, 0},
		{"dynamo", 122, 92, 76, map[string]int{"below_threshold": 16, "disaggregated": 76, "local_cheaper": 30}, 938.186, 21201.06, 0.134},
		// The default interference weight (0.1) sends 7 more of ours' requests
		// remote than weight 0 (4 of them below the threshold: their stall
		// alone outweighs the remote path), and stalls its decodes less.
		{"ours-w0", 122, 77, 77, map[string]int{"below_threshold": 16, "disaggregated": 77, "local_cheaper": 29}, 688.325, 21201.06, 0.866},
	}
	for _, c := range cases {
		t.Run(c.variant, func(t *testing.T) {
			r, err := RunPD(sc, c.variant, RunOptions{Seed: 2, Duration: 60 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if r.Requests != c.requests || r.Remote != c.remote || r.RouterRemote != c.routerRemote {
				t.Errorf("requests %d, remote %d, router remote %d; want %d, %d, %d",
					r.Requests, r.Remote, r.RouterRemote, c.requests, c.remote, c.routerRemote)
			}
			if len(r.Reasons) != len(c.reasons) {
				t.Errorf("reasons %v, want %v", r.Reasons, c.reasons)
			}
			for k, n := range c.reasons {
				if r.Reasons[k] != n {
					t.Errorf("reasons %v, want %v", r.Reasons, c.reasons)
					break
				}
			}
			if got := [3]float64{round3(r.TTFTP50Ms), round3(r.TTFTP99Ms), round3(r.StallMsPerToken)}; got != [3]float64{c.p50, c.p99, c.stall} {
				t.Errorf("TTFT p50, p99, stall %v; want %v", got, [3]float64{c.p50, c.p99, c.stall})
			}
		})
	}
}

// TestPDInterferenceWeight: the decode instance reports its running
// decodes, and the router's pd_interference_weight prices the stall. Both
// instances prefill 10k tokens/s: request 2's 1000 tokens cost the router
// 102.94 ms locally (the default policy's attention term: 1000 + 1000² /
// 34000 tokens of work) against 102.94 + 5 ms remote (policy transfer
// 0.005 ms a token), while request 1 (160 tokens, below the threshold)
// decodes there. Weight 0 and 0.04 (0.04 × 1 × 102.94 = 4.12 < 5 ms) keep
// it local: 5 + 100 ms, stalling request 1 by 105 ms. Weight 0.1 (10.29 >
// 5 ms) sends it remote: 105 ms + 1000 × 0.01 ms of transfer, no stall.
func TestPDInterferenceWeight(t *testing.T) {
	for _, c := range []struct {
		weight      string
		reason      string
		prefill     string
		ttft, stall float64
	}{
		{"0", "local_cheaper", "main-01", 105, 105},
		{"0.04", "local_cheaper", "main-01", 105, 105},
		{"0.1", "disaggregated", "main-00", 115, 0},
	} {
		t.Run(c.weight, func(t *testing.T) {
			y := strings.NewReplacer("DECIDER", "router", "SLOTS", "4",
				"decode_prefill_tokens_per_second: 5000", "decode_prefill_tokens_per_second: 10000",
				"variants: [{name: v}]", "variants: [{name: v, policy: {pd_interference_weight: "+c.weight+"}}]").Replace(pdTinyYAML)
			sc, err := ParsePDScenario([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			res, err := RunPD(sc, "v", RunOptions{Workload: &pdList{reqs: []*Request{pdReqAt(1, 0, 160, 100, 0), pdReqAt(2, 100, 1000, 10, 1000)}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Records) != 2 || res.Reasons[c.reason] != 1 || res.Reasons["below_threshold"] != 1 {
				t.Fatalf("%d records, reasons %v; want 2, below_threshold 1 and %s 1", len(res.Records), res.Reasons, c.reason)
			}
			r1, r2 := res.Records[0], res.Records[1]
			if r1.ID != 1 {
				r1, r2 = r2, r1
			}
			if r2.Prefill != c.prefill || round3(r2.TTFTMs) != c.ttft || round3(r1.StallMs) != c.stall {
				t.Errorf("request 2 prefilled on %s, TTFT %v ms, request 1 stalled %v ms; want %s, %v, %v",
					r2.Prefill, round3(r2.TTFTMs), round3(r1.StallMs), c.prefill, c.ttft, c.stall)
			}
		})
	}
}

// TestPDBatchedDecode checks the batch-dependent decode step exactly
// (decode_ms_per_running 1: 10 ms alone, 11 ms with two decoding).
// Request 1 decodes from 22.6 ms, alone for 192.4 ms (19.24 steps);
// request 2 decodes from 215 ms, 10 steps of 11 ms (TPOT 11, ends at
// 325 ms), while request 1 runs 10 more; its last 70.76 steps take
// 707.6 ms alone: TPOT 1010/100 ms. Local: request 1 decodes from 37 ms
// (6.3 steps alone), is frozen by request 2's 205 ms batch until 305 ms;
// then both decode at 11 ms a step (request 2: TPOT 11, ends at 415 ms;
// request 1 runs 10 steps) and request 1's last 83.7 steps take 837 ms
// alone: TPOT 1215/100 ms, of which 205 ms stall.
func TestPDBatchedDecode(t *testing.T) {
	cases := []struct {
		decider string
		tpot    [2]float64
		stall   [2]float64
	}{
		{"always", [2]float64{10.1, 11}, [2]float64{0, 0}},
		{"local", [2]float64{12.15, 11}, [2]float64{205, 0}},
	}
	for _, c := range cases {
		t.Run(c.decider, func(t *testing.T) {
			y := strings.NewReplacer("DECIDER", c.decider, "SLOTS", "4",
				"decode_interference: 1", "decode_interference: 1\n  decode_ms_per_running: 1").Replace(pdTinyYAML)
			sc, err := ParsePDScenario([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			reqs := []*Request{pdReqAt(1, 0, 160, 100, 0), pdReqAt(2, 100, 1000, 10, 1000)}
			res, err := RunPD(sc, "v", RunOptions{Workload: &pdList{reqs: reqs}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Records) != 2 {
				t.Fatalf("%d records, want 2", len(res.Records))
			}
			for _, rec := range res.Records {
				if got := [2]float64{round3(rec.TPOTMs), round3(rec.StallMs)}; got != [2]float64{c.tpot[rec.ID-1], c.stall[rec.ID-1]} {
					t.Errorf("request %d: TPOT, stall %v, want %v, %v", rec.ID, got, c.tpot[rec.ID-1], c.stall[rec.ID-1])
				}
			}
		})
	}
}
