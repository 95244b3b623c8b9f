package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// llmdFixture is a scorer over three instances of one deployment.
func llmdFixture(t *testing.T) *llmdScorer {
	t.Helper()
	return llmdScorerOf(t, "[{name: x, instances: 3, prefill_tokens_per_second: 10000, kv_blocks: 100}]")
}

// llmdScorerOf is a scorer over the deployments of a scenario (YAML).
func llmdScorerOf(t *testing.T, deployments string) *llmdScorer {
	t.Helper()
	sc := parse(t, `
name: l
duration: 10s
deployments: `+deployments+`
workload: {rate: 1, classes: [{name: c, share: 1, prefix_tokens: 64, suffix_tokens: 8}]}
variants: [{name: llm-d-style, picker: llmd}]
`)
	rc, err := sc.variantConfig("llm-d-style")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(rc, RunOptions{}, true)
	if err != nil {
		t.Fatal(err)
	}
	return newLLMD(rc, e.insts, 7)
}

func TestLLMDScore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stored  [3][]uint64
		waiting [3]uint32
		kv      [3]float64
		hashes  []uint64
		want    int
	}{
		// 3×(2/4) + 2×1 + 2×1 = 5.5 beats 3×0 + 2 + 2 = 4.
		{"prefix wins", [3][]uint64{{1, 2}, nil, nil}, [3]uint32{0, 0, 0}, [3]float64{}, []uint64{1, 2, 3, 4}, 0},
		// waiting 4, 2, 0 → queue terms 0, 0.5, 1: 0.75+0+2 = 2.75, 0+1+2 = 3, 0+2+2 = 4.
		{"queue wins", [3][]uint64{{1}, nil, nil}, [3]uint32{4, 2, 0}, [3]float64{}, []uint64{1, 2, 3, 4}, 2},
		// a match must start at the first block: {2, 3} on instance 1 matches 0.
		// 0: 0+2+2×0.5 = 3, 1: 0+2+2×0.9 = 3.8, 2: 0+2+2×0.8 = 3.6.
		{"kv wins, match from the first block", [3][]uint64{nil, {2, 3}, nil}, [3]uint32{1, 1, 1}, [3]float64{0.5, 0.1, 0.2}, []uint64{1, 2, 3}, 1},
		// full match on 2 with a long queue: 3 + 0 + 2 = 5 against 0 + 2 + 2 = 4 on 0.
		{"full match outweighs the longest queue", [3][]uint64{nil, nil, {5, 6}}, [3]uint32{0, 3, 9}, [3]float64{}, []uint64{5, 6}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := llmdFixture(t)
			for i := range 3 {
				if err := s.report(0, i, &state.Report{Stored: tc.stored[i], WaitingRequests: tc.waiting[i], KVCacheUsage: tc.kv[i]}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.pick(0, &Request{Hashes: tc.hashes, PromptTokens: uint32(16 * len(tc.hashes))})
			if err != nil || got != tc.want {
				t.Fatalf("pick = %d, %v; want %d (scores %v)", got, err, tc.want, s.scores)
			}
		})
	}
}

// TestLLMDTies: equal scores are drawn with the seeded RNG, exactly as a
// replay of rand.NewPCG(7, ...) gives; removed blocks stop matching; a
// deployment weighted 0 is skipped.
func TestLLMDTies(t *testing.T) {
	s := llmdFixture(t)
	for i := range 3 {
		if err := s.report(0, i, &state.Report{Stored: []uint64{9}}); err != nil {
			t.Fatal(err)
		}
	}
	replay := rand.New(rand.NewPCG(7, 0x6c6c6d2d64))
	for range 300 {
		got, err := s.pick(0, &Request{Hashes: []uint64{9, 10}})
		if err != nil {
			t.Fatal(err)
		}
		if want := replay.IntN(3); got != want {
			t.Fatalf("tie broken to %d, replay says %d", got, want)
		}
	}
	if err := s.report(0, 1, &state.Report{Removed: []uint64{9}}); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if got, _ := s.pick(0, &Request{Hashes: []uint64{9}}); got == 1 {
			t.Fatal("instance 1 chosen after its block was removed")
		}
	}
	s.setWeights(map[string]float64{"x": 0}, 2)
	if _, err := s.pick(0, &Request{Hashes: []uint64{9}}); !errors.Is(err, scheduler.ErrAllWeightsZero) {
		t.Fatalf("pick with every weight 0: %v; want ErrAllWeightsZero", err)
	}
}

// TestLLMDWeightZeroSkipped: instances of a deployment weighted 0 are never
// chosen, even holding the whole prefix with the shortest queue, and are
// left out of the queue term's min-max; the other deployment's instances
// are scored and drawn as before (both of y's are chosen), whatever their
// weight above 0.
func TestLLMDWeightZeroSkipped(t *testing.T) {
	s := llmdScorerOf(t, `[{name: x, instances: 2, prefill_tokens_per_second: 10000, kv_blocks: 100},
  {name: y, instances: 2, prefill_tokens_per_second: 10000, kv_blocks: 100}]`)
	// x (0, 1) holds the prefix and has no queue; y (2, 3) waits 4 and 8.
	for i, rep := range []state.Report{{Stored: []uint64{9, 10}}, {Stored: []uint64{9, 10}}, {WaitingRequests: 4}, {WaitingRequests: 8}} {
		if err := s.report(0, i, &rep); err != nil {
			t.Fatal(err)
		}
	}
	req := &Request{Hashes: []uint64{9, 10}}
	if got, err := s.pick(0, req); err != nil || got > 1 {
		t.Fatalf("both weighted: pick = %d, %v; want x's 0 or 1 (prefix and queue win)", got, err)
	}
	for _, w := range []float64{1, 0.001} {
		s.setWeights(map[string]float64{"x": 0, "y": w}, 2)
		var chosen [4]int
		for range 200 {
			got, err := s.pick(0, req)
			if err != nil {
				t.Fatalf("y weighted %v: %v", w, err)
			}
			chosen[got]++
		}
		// Among y alone, 2's queue (4) is the minimum: queue terms 1 and 0,
		// so 2 always wins, and 0 and 1 never show.
		if chosen != [4]int{0, 0, 200, 0} {
			t.Fatalf("y weighted %v, x 0: chosen %v; want all on 2", w, chosen)
		}
		if want := float64(llmdQueueWeight + llmdKVWeight); s.scores[2] != want {
			t.Fatalf("2's score %v; want %v (queue term 1: x's empty queues are out of the range)", s.scores[2], want)
		}
	}
	// Equal queues on y: the tie is drawn between both of y's instances.
	if err := s.report(0, 3, &state.Report{WaitingRequests: 4}); err != nil {
		t.Fatal(err)
	}
	var chosen [4]int
	for range 200 {
		got, _ := s.pick(0, req)
		chosen[got]++
	}
	if chosen[0]+chosen[1] != 0 || chosen[2] == 0 || chosen[3] == 0 {
		t.Fatalf("y tied, x 0: chosen %v; want both of y's, none of x's", chosen)
	}
}

// TestLLMDRun: a whole run of the baseline is deterministic and serves
// every request.
func TestLLMDRun(t *testing.T) {
	sc := parse(t, tinyYAML+"  - {name: llm-d-style, picker: llmd}\n")
	a := run(t, sc, "llm-d-style", RunOptions{})
	b := run(t, sc, "llm-d-style", RunOptions{})
	if len(a.Records)+len(a.Rejected) != a.Generated {
		t.Fatalf("%d served + %d rejected of %d", len(a.Records), len(a.Rejected), a.Generated)
	}
	if !reflect.DeepEqual(a.Records, b.Records) {
		t.Fatal("two runs differ")
	}
	// Seed 11's exact outcome: the scorer's draws and the precise index
	// (a 0 hit ratio would mean the cache events are not read). The
	// figures are simout.Summarise's (no warm-up here).
	var ttft []float64
	var prompt, hit uint64
	perInst := make([]int, len(a.Instances))
	for _, r := range a.Records {
		ttft = append(ttft, float64(r.TTFT)/1e6)
		prompt, hit = prompt+uint64(r.Prompt), hit+uint64(r.Hit)
		perInst[r.Instance]++
	}
	slices.Sort(ttft)
	share := float64(slices.Max(perInst)) / float64(len(a.Records))
	if got := fmt.Sprintf("%.3f %.6f %.4f", percentile(ttft, 0.99), float64(hit)/float64(prompt), share); got != "97.489 0.679851 0.3103" {
		t.Fatalf("p99, hit ratio, max share = %s", got)
	}
}
