package sim

import (
	"math/rand/v2"
	"time"

	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// Weights of the llm-d-style scorer: llm-d's endpoint picker in its default
// precise-prefix profile weighs the prefix scorer 3, the queue scorer 2 and
// the KV-cache utilisation scorer 2.
const (
	llmdPrefixWeight = 3
	llmdQueueWeight  = 2
	llmdKVWeight     = 2
)

// llmdScorer is a baseline in the style of llm-d's endpoint picker with its
// default precise-prefix profile. Per instance it scores
//
//	3 × matched/blocks + 2 × (1 − (w − w_min)/(w_max − w_min)) + 2 × (1 − kv)
//
// where matched is the request's longest run of blocks, from the first,
// that the instance's cache events say it holds (a precise index, the
// simulator's own, fed only by the reports), w the instance's reported
// waiting requests (the min-max term is 1 for all when every w is equal)
// and kv its reported KV-cache usage; the highest score wins, ties drawn
// uniformly with a seeded RNG. It sees nothing between two reports (no
// optimistic accounting). Deployment weights only exclude: instances of a
// deployment weighted 0 are skipped, the others are scored alike. Without
// cache events matched is always 0. Not safe for concurrent use.
type llmdScorer struct {
	rng     *rand.Rand
	deps    []string
	depOf   []int
	allowed []bool                // per deployment: weight > 0
	blocks  []map[uint64]struct{} // per instance, from its cache events
	waiting []uint32
	kv      []float64
	scores  []float64 // scratch, per instance
	ties    []int     // scratch
}

func newLLMD(rc *runConfig, insts []*Instance, seed uint64) *llmdScorer {
	s := &llmdScorer{rng: rand.New(rand.NewPCG(seed, 0x6c6c6d2d64)), allowed: make([]bool, len(rc.sc.Deployments))}
	for _, d := range rc.sc.Deployments {
		s.deps = append(s.deps, d.Name)
	}
	for _, in := range insts {
		s.depOf = append(s.depOf, in.Deployment)
		s.blocks = append(s.blocks, make(map[uint64]struct{}))
	}
	s.waiting = make([]uint32, len(insts))
	s.kv = make([]float64, len(insts))
	s.scores = make([]float64, len(insts))
	s.setWeights(rc.weights[0].Weights, 1)
	return s
}

func (s *llmdScorer) setWeights(w map[string]float64, _ uint64) {
	for d, name := range s.deps {
		s.allowed[d] = w[name] > 0
	}
}

// report takes the instance's waiting requests, KV usage and cache events.
func (s *llmdScorer) report(_ time.Duration, inst int, rep *state.Report) error {
	s.waiting[inst], s.kv[inst] = rep.WaitingRequests, rep.KVCacheUsage
	b := s.blocks[inst]
	if rep.CacheCleared {
		clear(b)
	}
	for _, h := range rep.Removed {
		delete(b, h)
	}
	for _, h := range rep.Stored {
		b[h] = struct{}{}
	}
	return nil
}

// matched is the longest run of hashes, from the first, that inst holds.
func (s *llmdScorer) matched(inst int, hashes []uint64) int {
	b := s.blocks[inst]
	for k, h := range hashes {
		if _, ok := b[h]; !ok {
			return k
		}
	}
	return len(hashes)
}

func (s *llmdScorer) pick(_ time.Duration, r *Request) (int, error) {
	wmin, wmax, seen := uint32(0), uint32(0), false
	for i, d := range s.depOf {
		if !s.allowed[d] {
			continue
		}
		if w := s.waiting[i]; !seen || w < wmin {
			wmin = w
		}
		wmax = max(wmax, s.waiting[i])
		seen = true
	}
	if !seen {
		return -1, scheduler.ErrAllWeightsZero
	}
	best := 0.0
	s.ties = s.ties[:0]
	for i, d := range s.depOf {
		if !s.allowed[d] {
			continue
		}
		prefix := 0.0
		if n := len(r.Hashes); n > 0 {
			prefix = float64(s.matched(i, r.Hashes)) / float64(n)
		}
		queue := 1.0
		if wmax > wmin {
			queue = float64(wmax-s.waiting[i]) / float64(wmax-wmin)
		}
		score := llmdPrefixWeight*prefix + llmdQueueWeight*queue + llmdKVWeight*(1-s.kv[i])
		s.scores[i] = score
		switch {
		case len(s.ties) == 0 || score > best:
			best, s.ties = score, append(s.ties[:0], i)
		case score == best:
			s.ties = append(s.ties, i)
		}
	}
	k := s.ties[0]
	if len(s.ties) > 1 {
		k = s.ties[s.rng.IntN(len(s.ties))]
	}
	return k, nil
}
