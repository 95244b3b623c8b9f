package sim

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestTTFTExact: one idle instance, one request per second. A unique
// 1000-token prompt takes overhead + work/throughput = 5 ms +
// 1000·(1 + 500/17000)/10000 s = 107.941176 ms; a prompt whose 992-token
// prefix is cached takes 5 ms + 8·(1 + (992 + 4)/17000)/10000 s =
// 5.846871 ms (the attention term: its 8 new tokens attend to the 992
// cached ones).
func TestTTFTExact(t *testing.T) {
	for _, tc := range []struct {
		name, class string
		first, rest time.Duration
		hit         uint32
	}{
		{"unique", "    - {name: u, share: 1, suffix_tokens: 1000}", 107941176 * time.Nanosecond, 107941176 * time.Nanosecond, 0},
		{"shared", "    - {name: s, share: 1, groups: 1, prefix_tokens: 992, suffix_tokens: 8}", 107941176 * time.Nanosecond, 5846871 * time.Nanosecond, 992},
	} {
		for _, variant := range []string{"softmax", "softmax-noev"} {
			t.Run(tc.name+"/"+variant, func(t *testing.T) {
				sc := parse(t, oneInstance(1, tc.class))
				res := run(t, sc, variant, RunOptions{})
				if len(res.Records) != 19 { // arrivals at 1s..19s
					t.Fatalf("%d requests served, want 19", len(res.Records))
				}
				for i, r := range res.Records {
					want, hit := tc.rest, tc.hit
					if i == 0 {
						want, hit = tc.first, 0
					}
					if r.Arrival != time.Duration(i+1)*time.Second || r.TTFT != want || r.Hit != hit || r.Wait != 0 {
						t.Fatalf("request %d: arrival %v TTFT %v hit %d wait %v, want %v, %v, %d, 0",
							i, r.Arrival, r.TTFT, r.Hit, r.Wait, time.Duration(i+1)*time.Second, want, hit)
					}
				}
			})
		}
	}
}

// TestTwoEqualInstancesSplit: two identical idle instances, unique prompts:
// every cost is equal, so softmax gives each p = 1/2 and the choice is the
// router's second draw of each pick (< 0.5: the first instance). The count
// is replayed from the router's seeded RNG exactly.
func TestTwoEqualInstancesSplit(t *testing.T) {
	sc := parse(t, oneInstance(2, "    - {name: u, share: 1, suffix_tokens: 1000}"))
	sc.Duration = Duration(401 * time.Second)
	res := run(t, sc, "softmax", RunOptions{})
	rng := rand.New(rand.NewPCG(sc.Seed^0x9e3779b97f4a7c15, 0x726f75746572))
	want := 0
	for range 400 {
		rng.Float64() // deployment draw
		if rng.Float64() < 0.5 {
			want++
		}
	}
	got := int(res.Instances[0].Requests)
	if got != want || int(res.Instances[1].Requests) != 400-want {
		t.Fatalf("instance a-00 served %d of 400, a-01 %d; want %d and %d", got, res.Instances[1].Requests, want, 400-want)
	}
	if got < 170 || got > 230 { // 3 sigma of Binomial(400, 1/2) is 30
		t.Fatalf("split %d/400 is not about half", got)
	}
	t.Logf("seeded split: %d / %d", got, 400-got)
}

// TestTTFTLinearPhysics: doubling_context_tokens 0 turns the attention
// term off: the unique prompt takes 5 ms + 100 ms, the cached one
// 5 ms + 0.8 ms; a negative value is refused.
func TestTTFTLinearPhysics(t *testing.T) {
	for _, tc := range []struct {
		class       string
		first, rest time.Duration
	}{
		{"    - {name: u, share: 1, suffix_tokens: 1000}", 105 * time.Millisecond, 105 * time.Millisecond},
		{"    - {name: s, share: 1, groups: 1, prefix_tokens: 992, suffix_tokens: 8}", 105 * time.Millisecond, 5800 * time.Microsecond},
	} {
		y := strings.Replace(oneInstance(1, tc.class), "kv_blocks: 100000}", "kv_blocks: 100000, doubling_context_tokens: 0}", 1)
		res := run(t, parse(t, y), "softmax", RunOptions{})
		for i, r := range res.Records {
			want := tc.rest
			if i == 0 {
				want = tc.first
			}
			if r.TTFT != want {
				t.Fatalf("%s: request %d: TTFT %v, want %v", tc.class, i, r.TTFT, want)
			}
		}
	}
	y := strings.Replace(oneInstance(1, "    - {name: u, share: 1, suffix_tokens: 1000}"), "kv_blocks: 100000}", "kv_blocks: 100000, doubling_context_tokens: -1}", 1)
	if _, err := ParseScenario([]byte(y)); err == nil || !strings.Contains(err.Error(), "doubling_context_tokens must be 0 (off) or in [1, 1e9] tokens") {
		t.Fatalf("doubling_context_tokens -1: error %v", err)
	}
}
