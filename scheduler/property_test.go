package scheduler_test

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

const eps = 0x1p-52

// randomPool builds a random pool of n instances over nd deployments from
// rng: some weights 0, some instances ineligible, costs from 0 to ~1000 ms
// with reported queue ms (so a test can shift every cost by changing QueueMs
// alone), matched prefixes of 0..blocks.
func randomPool(rng *rand.Rand, n, nd, blocks int) *scheduler.Snapshot {
	snap := &scheduler.Snapshot{Deployments: make([]scheduler.Deployment, nd), Instances: make([]scheduler.Instance, n)}
	for k := range snap.Deployments {
		w := 0.0
		if rng.IntN(5) > 0 {
			w = 0.1 + 10*rng.Float64()
		}
		snap.Deployments[k] = scheduler.Deployment{Name: string(rune('A' + k)), Weight: w}
	}
	for i := range snap.Instances {
		in := scheduler.Instance{
			Deployment:             rng.IntN(nd),
			MatchedBlocks:          rng.IntN(blocks + 1),
			PrefillTokensPerSecond: 1000 + 20000*rng.Float64(),
			HasQueueMs:             true,
			QueueMs:                500 * rng.Float64(),
			AssignedTokens:         uint64(rng.IntN(1000)),
			KVUsage:                rng.Float64(),
		}
		if rng.IntN(4) == 0 {
			in.QueueMs = float64(rng.IntN(5) * 10) // exact ties
		}
		if rng.IntN(10) == 0 {
			in.Draining = true
		}
		in.LaneKey = scheduler.LaneKey(strconv.Itoa(i)) // no draw: the pools stay as they were
		snap.Instances[i] = in
	}
	return snap
}

// checkProperties runs the property checks on one random pool.
func checkProperties(t *testing.T, seed uint64, n, nd int, s scheduler.Strategy, lambda, delta, shift float64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	blocks := rng.IntN(64)
	snap := randomPool(rng, n, nd, blocks)
	p := policy(func(p *scheduler.Policy) { p.Strategy, p.LambdaH, p.DeltaMs = s, lambda, delta })
	req := scheduler.Request{PromptTokens: uint32(blocks*16 + rng.IntN(16)), Blocks: blocks}
	var d scheduler.Decision
	err := scheduler.Decide(p, req, snap, rand.New(rand.NewPCG(seed, 1)), &d)
	if err != nil && !errors.Is(err, scheduler.ErrNoEligibleInstance) && !errors.Is(err, scheduler.ErrAllWeightsZero) {
		t.Fatalf("Decide: %v", err)
	}
	// Non-negative, summing to 1 per deployment and overall; Joint; reasons.
	checkInvariants(t, snap, &d, err, 1e-12)
	if err != nil {
		return
	}
	maxCost := 0.0
	for _, r := range d.Instances {
		maxCost = max(maxCost, r.CostMs)
	}

	// A lower cost never gets a lower probability, in the same deployment
	// (up to 4 ulp of rounding).
	for i, a := range d.Instances {
		for j, b := range d.Instances {
			if a.Reason == scheduler.ReasonNone && b.Reason == scheduler.ReasonNone &&
				snap.Instances[i].Deployment == snap.Instances[j].Deployment &&
				a.CostMs < b.CostMs && a.Probability < b.Probability*(1-4*eps) {
				t.Fatalf("cost %v gets %v < cost %v gets %v", a.CostMs, a.Probability, b.CostMs, b.Probability)
			}
		}
	}

	// Changing instance costs (not hits, not eligibility) changes no P(d):
	// bit for bit, the load term being off.
	moved := cloneSnapshot(snap)
	for i := range moved.Instances {
		moved.Instances[i].QueueMs = 1000 * rng.Float64()
		moved.Instances[i].AssignedTokens = uint64(rng.IntN(100000))
	}
	var dm scheduler.Decision
	if err := scheduler.Decide(p, req, moved, rand.New(rand.NewPCG(seed, 1)), &dm); err != nil {
		t.Fatalf("Decide after moving costs: %v", err)
	}
	for k := range d.Deployments {
		if d.Deployments[k].Probability != dm.Deployments[k].Probability {
			t.Fatalf("P(%d) changed with costs: %v -> %v", k, d.Deployments[k].Probability, dm.Deployments[k].Probability)
		}
	}

	// Adding a constant to every cost changes no softmax probability (up to
	// the rounding of the shifted costs, amplified by 1/delta).
	if s == scheduler.Softmax {
		shifted := cloneSnapshot(snap)
		for i := range shifted.Instances {
			shifted.Instances[i].QueueMs += shift
		}
		var ds scheduler.Decision
		if err := scheduler.Decide(p, req, shifted, rand.New(rand.NewPCG(seed, 1)), &ds); err != nil {
			t.Fatalf("Decide after shifting costs: %v", err)
		}
		tol := 1e-12 + 16*eps*(maxCost+shift)/delta
		for i := range d.Instances {
			if a, b := d.Instances[i].Probability, ds.Instances[i].Probability; math.Abs(a-b) > tol {
				t.Fatalf("instance %d: P(i|d) %v -> %v after adding %v to every cost (tol %g)", i, a, b, shift, tol)
			}
		}
	}
}

func cloneSnapshot(s *scheduler.Snapshot) *scheduler.Snapshot {
	return &scheduler.Snapshot{
		Deployments: append([]scheduler.Deployment(nil), s.Deployments...),
		Instances:   append([]scheduler.Instance(nil), s.Instances...),
	}
}

// sanitise maps fuzzed numbers into the ranges the properties are stated for.
func sanitise(n uint16, nd, s uint8, lambda, delta, shift float64) (int, int, scheduler.Strategy, float64, float64, float64) {
	if !(lambda >= 0 && lambda <= 100) {
		lambda = 10
	}
	if !(delta >= 1e-3 && delta <= 1e6) {
		delta = 20
	}
	if !(shift >= 0 && shift <= 1e6) {
		shift = 1000
	}
	return 1 + int(n%300), 1 + int(nd%6), scheduler.Strategy(s % 3), lambda, delta, shift
}

func FuzzProperties(f *testing.F) {
	f.Add(uint64(1), uint16(10), uint8(2), uint8(0), 10.0, 20.0, 1000.0)
	f.Add(uint64(2), uint16(200), uint8(5), uint8(1), 0.0, 1.0, 1e6)
	f.Add(uint64(3), uint16(1), uint8(0), uint8(2), 100.0, 1e-3, 0.5)
	f.Add(uint64(4), uint16(64), uint8(3), uint8(0), 55.5, 1e5, 123.0)
	f.Add(uint64(5), uint16(30), uint8(1), uint8(0), 10.0, 0.01, 1e6)
	f.Fuzz(func(t *testing.T, seed uint64, n uint16, nd, s uint8, lambda, delta, shift float64) {
		ni, ndi, st, l, dl, sh := sanitise(n, nd, s, lambda, delta, shift)
		checkProperties(t, seed, ni, ndi, st, l, dl, sh)
	})
}

// TestProperties runs the property checks over many seeded pools, beyond
// the few seeds of FuzzProperties' corpus.
func TestProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(2024, 12))
	for range 300 {
		ni, ndi, st, l, dl, sh := sanitise(uint16(rng.IntN(300)), uint8(rng.IntN(6)), uint8(rng.IntN(3)),
			100*rng.Float64(), math.Pow(10, 6*rng.Float64()-2), math.Pow(10, 6*rng.Float64()))
		checkProperties(t, rng.Uint64(), ni, ndi, st, l, dl, sh)
	}
}

// FuzzDecideArbitrary feeds Decide arbitrary figures, NaN and infinities
// included: it must never panic, and must either fail with a sentinel and
// no choice, or succeed with a consistent decision.
func FuzzDecideArbitrary(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x02\x03 some bytes for the figures of a small pool ......................................"))
	nan := binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN()))
	f.Add(append(append([]byte{1, 4, 0, 0}, nan...), nan...))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := byteReader(data)
		p := scheduler.DefaultPolicy()
		p.Strategy = scheduler.Strategy(b.u8() % 4)
		if b.u8()%2 == 0 {
			p.LambdaH, p.DeltaMs, p.DeploymentDeltaMs, p.MaxQueueMs = b.f64(), b.f64(), b.f64(), b.f64()
		}
		nd, ni := int(b.u8()%5), int(b.u8()%12)
		snap := &scheduler.Snapshot{Deployments: make([]scheduler.Deployment, nd), Instances: make([]scheduler.Instance, ni)}
		for k := range snap.Deployments {
			snap.Deployments[k] = scheduler.Deployment{Weight: b.f64(), Unweighted: b.u8()%2 == 0}
		}
		for i := range snap.Instances {
			snap.Instances[i] = scheduler.Instance{
				Deployment: int(int8(b.u8())), MatchedBlocks: int(int16(b.u16())), BlockSizeTokens: uint32(b.u16()),
				PrefillTokensPerSecond: b.f64(), QueueMs: b.f64(), HasQueueMs: b.u8()%2 == 0,
				QueuedPrefillTokens: b.u64(), AssignedTokens: b.u64(), KVUsage: b.f64(),
				ReportAge: time.Duration(int64(b.u64())), Disconnected: b.u8()%8 == 0, Draining: b.u8()%8 == 0,
			}
		}
		req := scheduler.Request{PromptTokens: uint32(b.u64()), Blocks: int(int16(b.u16()))}
		var d scheduler.Decision
		err := scheduler.Decide(&p, req, snap, rand.New(rand.NewPCG(1, 2)), &d)
		if err == nil {
			checkInvariants(t, snap, &d, nil, 1e-9)
			return
		}
		known := false
		for _, s := range []error{scheduler.ErrInvalidPolicy, scheduler.ErrInvalidSnapshot, scheduler.ErrNoInstances,
			scheduler.ErrNoEligibleInstance, scheduler.ErrAllWeightsZero} {
			known = known || errors.Is(err, s)
		}
		if !known || d.Deployment != -1 || d.Instance != -1 {
			t.Fatalf("err %v, choice %d/%d", err, d.Deployment, d.Instance)
		}
	})
}

// byteReader hands out fuzz bytes as numbers, zeros once exhausted.
type byteReader []byte

func (b *byteReader) next(n int) []byte {
	out := make([]byte, 8)
	copy(out, *b)
	*b = (*b)[min(n, len(*b)):]
	return out
}
func (b *byteReader) u8() uint8    { return b.next(1)[0] }
func (b *byteReader) u16() uint16  { return binary.LittleEndian.Uint16(b.next(2)) }
func (b *byteReader) u64() uint64  { return binary.LittleEndian.Uint64(b.next(8)) }
func (b *byteReader) f64() float64 { return math.Float64frombits(b.u64()) }
