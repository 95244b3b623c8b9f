package readiness_test

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

// t0 is a bucket-aligned origin for every width used in the tests (a
// multiple of 10 s and of 5 s).
var t0 = time.Unix(1_700_000_000, 0)

// at returns t0 + d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// splitmix returns the i-th value of a splitmix64 sequence seeded with seed:
// uniform 64-bit values standing in for xxh3 block hashes.
func splitmix(seed, i uint64) uint64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// chain returns n chained block hashes of prefix family seed.
func chain(seed uint64, n int) []uint64 {
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = splitmix(seed, uint64(i))
	}
	return hs
}

// pool describes a snapshot: deployment names and, per instance, its
// deployment index, block size and throughput.
type pool struct {
	deps  []string
	insts []inst
}

type inst struct {
	dep int
	bs  uint32
	tps float64
}

// pick is one decision to record: the chosen instance, the per-deployment
// MatchedBlocks, the chosen instance's matched blocks, UncachedTokens and
// PrefillMs.
type pick struct {
	at       time.Duration
	hashes   []uint64
	prompt   uint32
	instance int
	depMatch []int
	matched  int
	uncached uint32
	ms       float64
}

// build returns the snapshot and decision of pk on pl.
func (pl pool) build(pk pick) (*scheduler.Snapshot, *scheduler.Decision) {
	snap := &scheduler.Snapshot{}
	for _, n := range pl.deps {
		snap.Deployments = append(snap.Deployments, scheduler.Deployment{Name: n, Weight: 1})
	}
	d := &scheduler.Decision{Instance: pk.instance, Deployment: pl.insts[pk.instance].dep,
		Deployments: make([]scheduler.DeploymentResult, len(pl.deps)),
		Instances:   make([]scheduler.InstanceResult, len(pl.insts))}
	for k := range d.Deployments {
		if k < len(pk.depMatch) {
			d.Deployments[k].MatchedBlocks = pk.depMatch[k]
		}
	}
	for _, in := range pl.insts {
		snap.Instances = append(snap.Instances, scheduler.Instance{Deployment: in.dep,
			BlockSizeTokens: in.bs, PrefillTokensPerSecond: in.tps})
	}
	snap.Instances[pk.instance].MatchedBlocks = pk.matched
	d.Instances[pk.instance].UncachedTokens = pk.uncached
	d.Instances[pk.instance].PrefillMs = pk.ms
	return snap, d
}

// fakeLive is a Live over fixed deployments; a deployment's cached blocks
// are a set of hashes, and Depth is the longest prefix of hashes in it.
type fakeLive struct {
	deps   []readiness.LiveDeployment
	cached map[string]map[uint64]bool
}

func (f *fakeLive) Deployments(dst []readiness.LiveDeployment) []readiness.LiveDeployment {
	return append(dst, f.deps...)
}

func (f *fakeLive) Depth(hashes []uint64, deployment string) int {
	set := f.cached[deployment]
	for i, h := range hashes {
		if !set[h] {
			return i
		}
	}
	return len(hashes)
}

// cache adds hs to deployment's cached set.
func (f *fakeLive) cache(deployment string, hs []uint64) {
	if f.cached == nil {
		f.cached = map[string]map[uint64]bool{}
	}
	if f.cached[deployment] == nil {
		f.cached[deployment] = map[uint64]bool{}
	}
	for _, h := range hs {
		f.cached[deployment][h] = true
	}
}

// checkFinite fails t if a float64 anywhere in v is NaN or infinite, or
// negative outside the fields allowed to be (HeadroomPct).
func checkFinite(t testing.TB, v any) {
	t.Helper()
	var walk func(path string, x reflect.Value)
	walk = func(path string, x reflect.Value) {
		switch x.Kind() {
		case reflect.Float64:
			f := x.Float()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				t.Errorf("%s = %v", path, f)
			}
			if f < 0 && !strings.HasSuffix(path, "HeadroomPct") {
				t.Errorf("%s = %v < 0", path, f)
			}
		case reflect.Struct:
			if x.Type() == reflect.TypeFor[time.Time]() {
				return
			}
			for i := range x.NumField() {
				walk(path+"."+x.Type().Field(i).Name, x.Field(i))
			}
		case reflect.Slice:
			for i := range x.Len() {
				walk(path+"[]", x.Index(i))
			}
		}
	}
	walk("Status", reflect.ValueOf(v))
}

// deepLive is a Live of deployments A and B (weight 1, one instance, 1000
// tokens/s each) where every chain is cached whole on A and not at all on B.
type deepLive struct{}

func (deepLive) Deployments(dst []readiness.LiveDeployment) []readiness.LiveDeployment {
	return append(dst,
		readiness.LiveDeployment{Name: "A", Weight: 1, Instances: 1, PrefillTokensPerSecond: 1000},
		readiness.LiveDeployment{Name: "B", Weight: 1, Instances: 1, PrefillTokensPerSecond: 1000})
}

func (deepLive) Depth(hashes []uint64, deployment string) int {
	if deployment == "A" {
		return len(hashes)
	}
	return 0
}
