package server

import (
	"math"
	"sync"
	"time"

	"github.com/prefixroute/prefixroute/frontend"
)

// TrafficShareWindow is the sliding window of the realised traffic share and
// hit ratio gauges (prefixroute_deployment_traffic_share_ratio,
// prefixroute_deployment_hit_ratio, prefixroute_deployment_window_picks):
// the picks of the last 60 seconds, counted in one-second buckets, so a
// weight change shows in the share within a minute.
const TrafficShareWindow = windowBuckets * time.Second

const windowBuckets = 60

// pickRing is one deployment's recent successful picks: per one-second
// bucket, the picks, their prefix blocks and their matched blocks, and,
// for the console, each instance's picks over its last
// frontend.InstanceRateSeconds. Two readers share it: the traffic-share and
// hit-ratio gauges sum its last TrafficShareWindow (sum), and the console
// shows all of it (series, history.go). A ring within the history budget
// (maxHistoryRings) spans historySeconds; past it, only
// TrafficShareWindow, for the gauges, and the console has no history of
// the deployment.
//
// It is not internal/readiness's window (state.Pool's tracker, also
// recorded on every pick): that one spans the operator's
// --migration-window in 5 s buckets, counts tokens, and tracks a bounded
// number of deployments; the gauges must move within a second, over a
// fixed 60 s, for every deployment.
//
// Use init before the first add. Safe for concurrent use: one short
// critical section per add.
type pickRing struct {
	mu      sync.Mutex
	buckets []pickBucket         // historySeconds or windowBuckets of them
	inst    map[string]*instRate // nil in a ring without history
}

type pickBucket struct {
	sec                    int64 // the Unix second the counts are of
	picks, blocks, matched uint32
}

// instRate is one instance's picks in its last InstanceRateSeconds seconds.
type instRate struct {
	sec [frontend.InstanceRateSeconds]int64
	n   [frontend.InstanceRateSeconds]uint32
}

// init makes r an empty ring: spanning historySeconds, with the instances'
// rates, when history is set; TrafficShareWindow otherwise.
func (r *pickRing) init(history bool) {
	n := windowBuckets
	if history {
		n = historySeconds
		r.inst = make(map[string]*instRate)
	}
	r.buckets = make([]pickBucket, n)
}

// history reports whether r keeps the console's history.
func (r *pickRing) history() bool { return r.inst != nil }

// add counts one pick at Unix second sec, chosen on instance.
func (r *pickRing) add(sec int64, blocks, matched uint64, instance string) {
	r.mu.Lock()
	b := &r.buckets[ringIndex(sec, len(r.buckets))]
	if b.sec != sec {
		*b = pickBucket{sec: sec}
	}
	b.picks++
	b.blocks = add32(b.blocks, blocks)
	b.matched = add32(b.matched, matched)
	if r.inst != nil {
		r.rate(sec, instance)
	}
	r.mu.Unlock()
}

// rate counts one pick at sec on instance. Called with r.mu held.
func (r *pickRing) rate(sec int64, instance string) {
	ir := r.inst[instance]
	if ir == nil {
		if len(r.inst) >= maxTrackedInstances {
			clear(r.inst)
		}
		ir = &instRate{}
		r.inst[instance] = ir
	}
	i := ringIndex(sec, frontend.InstanceRateSeconds)
	if ir.sec[i] != sec {
		ir.sec[i], ir.n[i] = sec, 0
	}
	ir.n[i]++
}

// sum returns the counts of the seconds in (sec-windowBuckets, sec]: the
// gauges' TrafficShareWindow.
func (r *pickRing) sum(sec int64) (picks, blocks, matched uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t := sec - windowBuckets + 1; t <= sec; t++ {
		if b := &r.buckets[ringIndex(t, len(r.buckets))]; b.sec == t {
			picks += uint64(b.picks)
			blocks += uint64(b.blocks)
			matched += uint64(b.matched)
		}
	}
	return picks, blocks, matched
}

// ringIndex is the bucket of second sec in a ring of n.
func ringIndex(sec int64, n int) int {
	i := int(sec % int64(n))
	if i < 0 {
		i += n
	}
	return i
}

// add32 is a+b, saturating at the largest uint32.
func add32(a uint32, b uint64) uint32 {
	return uint32(min(uint64(a)+b, math.MaxUint32))
}
