package sim

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"time"

	"github.com/prefixroute/prefixroute/internal/calib"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/scheduler"
)

// epoch is virtual time 0 as the router state sees it.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// router chooses an instance for each request. Implementations are not
// safe for concurrent use: the simulation loop owns them.
type router interface {
	// pick returns the chosen instance's index and sets r.PredictedHit.
	pick(now time.Duration, r *Request) (int, error)
	// report applies an instance's load report.
	report(now time.Duration, inst int, rep *state.Report) error
	// setWeights publishes a weight step.
	setWeights(w map[string]float64, version uint64)
}

// stateRouter is the production path: a state.Registry with one pool that
// every instance reports to through its own Session, Pool.Pick with its
// prefix index and optimistic accounting, and the scheduler's Decide.
type stateRouter struct {
	reg      *state.Registry
	pool     *state.Pool
	sessions []*state.Session
	index    map[string]int
	rng      *rand.Rand
	pcg      *rand.PCG // rng's source
	// liveDraws reseeds pcg before each pick as prefixrouted does for a
	// live run's Pick (RunOptions.LiveDraws).
	liveDraws bool
	policy    scheduler.Policy
	in        state.PickInput
	out       state.Pick
	// onPick, when set, sees every successful pick (the readiness probe).
	onPick func(now time.Duration, r *Request, out *state.Pick)
	// formula: after every pick, re-apply the chosen instance's last
	// report (lastRep, lastAt), dropping the work assigned since.
	formula bool
	lastRep []state.Report
	lastAt  []time.Duration
	// learn, when set (Variant.Outcomes), fits outcomes (outcomes.go).
	learn *outcomes
}

func newStateRouter(rc *runConfig, insts []*Instance, seed uint64) (*stateRouter, error) {
	var opts []state.Option
	if rc.probe != nil {
		opts = append(opts, state.WithMigration(rc.probe.trackerConfig()))
	}
	pcg := rand.NewPCG(seed, 0x726f75746572)
	sr := &stateRouter{reg: state.NewRegistry(state.Limits{}, opts...), index: make(map[string]int, len(insts)),
		rng: rand.New(pcg), pcg: pcg, policy: rc.policy,
		formula: rc.variant.Optimistic != nil && !*rc.variant.Optimistic}
	if sr.formula {
		sr.lastRep, sr.lastAt = make([]state.Report, len(insts)), make([]time.Duration, len(insts))
	}
	pool, err := sr.reg.Ensure(rc.sc.Pool)
	if err != nil {
		return nil, err
	}
	sr.pool = pool
	if rc.variant.Outcomes {
		sr.learn = &outcomes{book: calib.NewBook(), pool: pool, pol: rc.sc.Pool}
	}
	sr.setWeights(rc.weights[0].Weights, 1)
	for i, in := range insts {
		id := state.Identity{Pool: rc.sc.Pool, Deployment: rc.sc.Deployments[in.Deployment].Name,
			Instance: in.ID, Address: in.ID + ".sim:8000"}
		if err := sr.reg.ValidateIdentity(id); err != nil {
			return nil, err
		}
		s, err := pool.Connect(epoch, id)
		if err != nil {
			return nil, err
		}
		sr.sessions = append(sr.sessions, s)
		sr.index[in.ID] = i
	}
	return sr, nil
}

func (sr *stateRouter) pick(now time.Duration, r *Request) (int, error) {
	sr.in = state.PickInput{Hashes: r.Hashes, PromptTokens: r.PromptTokens, TTFTTargetMs: r.TargetMs}
	if err := sr.reg.ValidatePick(&sr.in); err != nil {
		return -1, err
	}
	if sr.liveDraws || sr.policy.OnSaturation == scheduler.SaturationQueue {
		// A held pick retries with its own seed, as prefixrouted's
		// (server/flow.go): the same deployment draw each time.
		sr.pcg.Seed(r.ID+1, liveSeedStream)
	}
	if err := sr.pool.Pick(epoch.Add(now), &sr.in, sr.rng, &sr.out); err != nil {
		if d := &sr.out.Decision; errors.Is(err, scheduler.ErrDeploymentSaturated) && d.HeldDeployment >= 0 {
			r.HeldBy = sr.out.Snapshot.Deployments[d.HeldDeployment].Name
		}
		return -1, err
	}
	if sr.onPick != nil {
		sr.onPick(now, r, &sr.out)
	}
	d := &sr.out.Decision
	i := sr.index[sr.out.Snapshot.Instances[d.Instance].ID]
	r.PredictedHit = r.PromptTokens - d.Instances[d.Instance].UncachedTokens
	r.PredictedMs = d.Instances[d.Instance].PredictedTTFTMs()
	r.PredictedQueueMs = d.Instances[d.Instance].QueueMs
	r.Hold = sr.out.Hold
	if sr.learn != nil {
		sr.learn.features(now, r, &sr.out)
	}
	if sr.formula {
		if err := sr.sessions[i].Report(epoch.Add(sr.lastAt[i]), &sr.lastRep[i]); err != nil {
			return -1, err
		}
	}
	return i, nil
}

func (sr *stateRouter) report(now time.Duration, inst int, rep *state.Report) error {
	if err := sr.reg.ValidateReport(rep); err != nil {
		return err
	}
	if sr.formula {
		sr.lastRep[inst], sr.lastAt[inst] = *rep, now
		sr.lastRep[inst].Stored, sr.lastRep[inst].Removed, sr.lastRep[inst].CacheCleared = nil, nil, false
	}
	return sr.sessions[inst].Report(epoch.Add(now), rep)
}

func (sr *stateRouter) setWeights(w map[string]float64, version uint64) {
	sr.pool.SetConfig(&state.Config{Weights: maps.Clone(w), WeightsVersion: version, Policy: sr.policy, PolicyVersion: 1})
}

// liveSeedStream is prefixrouted's PCG stream for a Pick with a seed
// (server/pick.go); a live run's gateway workers send request id + 1.
const liveSeedStream = 0x9e3779b97f4a7c15

// baseline is one of the simulator's own pickers, for comparison: it sees
// neither load nor caches, only the deployment weights. "random" draws a
// deployment by weight and an instance uniformly; "round_robin" is smooth
// weighted round-robin over the instances (weight w_d / n_d each);
// "affinity" is weighted rendezvous hashing of the request's first block
// hash, which keeps a prefix on one instance, the way a gateway's
// consistent hashing does.
type baseline struct {
	kind    string
	rng     *rand.Rand
	deps    []string
	depOf   []int
	perDep  []int
	weights []float64 // per instance: w_d / n_d
	current []float64 // round-robin state
}

func newBaseline(rc *runConfig, insts []*Instance, seed uint64) *baseline {
	b := &baseline{kind: rc.variant.Picker, rng: rand.New(rand.NewPCG(seed, 0x626173656c696e65))}
	for _, d := range rc.sc.Deployments {
		b.deps = append(b.deps, d.Name)
		b.perDep = append(b.perDep, d.Instances)
	}
	for _, in := range insts {
		b.depOf = append(b.depOf, in.Deployment)
	}
	b.weights = make([]float64, len(insts))
	b.current = make([]float64, len(insts))
	b.setWeights(rc.weights[0].Weights, 1)
	return b
}

func (b *baseline) setWeights(w map[string]float64, _ uint64) {
	for i, d := range b.depOf {
		b.weights[i] = w[b.deps[d]] / float64(b.perDep[d])
	}
}

func (b *baseline) report(time.Duration, int, *state.Report) error { return nil }

func (b *baseline) pick(_ time.Duration, r *Request) (int, error) {
	total := 0.0
	for _, w := range b.weights {
		total += w
	}
	if total <= 0 {
		return -1, scheduler.ErrAllWeightsZero
	}
	best := -1
	switch b.kind {
	case "random":
		u := b.rng.Float64() * total
		for i, w := range b.weights {
			if w > 0 {
				best = i
				if u -= w; u < 0 {
					break
				}
			}
		}
	case "round_robin":
		for i, w := range b.weights {
			b.current[i] += w
			if w > 0 && (best < 0 || b.current[i] > b.current[best]) {
				best = i
			}
		}
		b.current[best] -= total
	case "affinity":
		k := r.ID
		if len(r.Hashes) > 0 {
			k = r.Hashes[0]
		}
		score := math.Inf(-1)
		for i, w := range b.weights {
			if w <= 0 {
				continue
			}
			u := (float64(splitmix(k^splitmix(uint64(i)))>>11) + 0.5) / (1 << 53)
			if s := -w / math.Log(u); s > score {
				best, score = i, s
			}
		}
	default:
		return -1, fmt.Errorf("sim: unknown picker %q", b.kind)
	}
	return best, nil
}
