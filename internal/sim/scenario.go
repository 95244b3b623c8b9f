package sim

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/prefixroute/prefixroute/scheduler"
)

//go:embed scenarios/*.yaml
var builtin embed.FS

// Duration is a time.Duration that a scenario file writes as a Go duration
// string ("50ms", "10m") or a number of seconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML parses "1m30s" or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if v, err := strconv.ParseFloat(n.Value, 64); err == nil {
		*d = Duration(v * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: duration %q: want e.g. \"50ms\", \"10m\" or a number of seconds", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// String formats d as a Go duration.
func (d Duration) String() string { return time.Duration(d).String() }

// Scenario is one simulated experiment: a fleet, a workload, a weight
// schedule, a base policy and the variants to compare on identical traffic.
// It is read from YAML (or JSON, which is YAML) by ParseScenario or
// LoadScenario; field names are those of the yaml tags. A Scenario is only
// read by Run, so one may be shared by concurrent runs.
type Scenario struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Seed drives the workload and the routers' draws. Default 1.
	Seed uint64 `yaml:"seed"`
	// Duration is how long requests arrive; the run then drains the queues.
	Duration Duration `yaml:"duration"`
	// Warmup is left out of the summary (the series keep it). Default 0.
	Warmup Duration `yaml:"warmup"`
	// Pool is the pool name, which also seeds the block hashes. Default "sim".
	Pool string `yaml:"pool"`
	// BlockTokens is the KV block size. Default 16.
	BlockTokens int `yaml:"block_tokens"`
	// ReportInterval is how often every instance reports. Default 50ms.
	ReportInterval Duration `yaml:"report_interval"`
	// CacheEvents makes instances report their stored and removed blocks;
	// without, the routers guess with their approximate index.
	CacheEvents bool `yaml:"cache_events"`
	// Routers is the number of router replicas (sidecars): each has its own
	// state and sees every report but only its own picks. Default 1.
	Routers     int              `yaml:"routers"`
	Deployments []DeploymentSpec `yaml:"deployments"`
	// Weights is the weight schedule; the first step must be at 0. Empty:
	// every deployment weighs 1.
	Weights []WeightStep `yaml:"weights"`
	// Ramp, when set, adds a linear ramp (rollout.Plan) to the schedule.
	Ramp *RampSpec `yaml:"ramp"`
	// Readiness, when set, probes router 0's migration estimate before a
	// cutover and measures what actually followed (Result.Readiness).
	Readiness *ReadinessSpec `yaml:"readiness"`
	Policy    PolicySpec     `yaml:"policy"`
	Workload  WorkloadSpec   `yaml:"workload"`
	Variants  []Variant      `yaml:"variants"`
	// Focus is the deployment whose traffic share the plots show. Default
	// the last deployment.
	Focus string `yaml:"focus"`
	// Smooth is the moving-average window of the plots and of the dip
	// measurement. Default 10s.
	Smooth Duration `yaml:"smooth"`

	dir string // the file's directory, for the trace path
}

// DeploymentSpec is one deployment: identical instances.
type DeploymentSpec struct {
	Name      string `yaml:"name"`
	Instances int    `yaml:"instances"`
	// PrefillTokensPerSecond is each instance's prefill throughput.
	PrefillTokensPerSecond float64 `yaml:"prefill_tokens_per_second"`
	// BatchOverhead is the fixed cost of every prefill batch.
	BatchOverhead Duration `yaml:"batch_overhead"`
	// DoublingContextTokens is C of the prefill physics: a request's u
	// uncached tokens on c cached ones take u·(1 + (c + u/2)/C) /
	// prefill_tokens_per_second (scheduler.PrefillMs). Default
	// scheduler.DefaultDoublingContextTokens (17,000, the 8B shape on an
	// H200 in data/prefill-h200); 0: no attention term (cached tokens
	// free, the physics before issue 29).
	DoublingContextTokens *float64 `yaml:"doubling_context_tokens"`
	// MaxBatchTokens bounds the uncached tokens of one batch (a request
	// larger than that runs alone). Default 8192.
	MaxBatchTokens int `yaml:"max_batch_tokens"`
	// KVBlocks is the prefix cache's capacity in blocks.
	KVBlocks int `yaml:"kv_blocks"`
	// DecodePerToken is the decode time per output token; 0: no decode.
	DecodePerToken Duration `yaml:"decode_per_token"`
	// QueueReport is what the instances report as their queue: "uncached"
	// (default: the waiting requests' uncached tokens, as matched when they
	// were queued) or "prompt" (their whole prompts, as an engine that
	// looks up its cache only when it schedules a request reports it).
	QueueReport string `yaml:"queue_report"`
}

// WeightStep sets the deployment weights from At on.
type WeightStep struct {
	At      Duration           `yaml:"at"`
	Weights map[string]float64 `yaml:"weights"`
}

// Variant is one way of routing the scenario's traffic.
type Variant struct {
	Name string `yaml:"name"`
	// Picker is "router" (the real scheduler and state, the default) or one
	// of the simulator's own baselines: "round_robin", "random",
	// "affinity" (rendezvous hashing of the first block).
	Picker         string       `yaml:"picker"`
	Policy         PolicySpec   `yaml:"policy"`
	CacheEvents    *bool        `yaml:"cache_events"`
	Routers        int          `yaml:"routers"`
	ReportInterval Duration     `yaml:"report_interval"`
	Weights        []WeightStep `yaml:"weights"`
	// Ramp and Readiness replace the scenario's when set.
	Ramp      *RampSpec      `yaml:"ramp"`
	Readiness *ReadinessSpec `yaml:"readiness"`
	// Optimistic false makes the router formula-only: after every pick the
	// chosen instance's last report is applied again, which drops the work
	// the router assigned since (optimistic accounting), so every pick sees
	// the reported load only. With cache events the approximate index is
	// not used either. Default true; router variants only, not live.
	Optimistic *bool `yaml:"optimistic"`
	// Gate "llmd" holds requests in the router's queue while llm-d's
	// utilization detector would call the pool saturated: the mean over
	// instances of max(waiting requests / 5, KV usage / 0.8) of their last
	// reports is 1 or more; the queue is the same as on_saturation: queue's
	// (flow.go). "" (default): none.
	Gate string `yaml:"gate"`
	// Outcomes makes the gateway report every request's time to first
	// token, which teaches the router each deployment's prefill model
	// (internal/calib; used under policy calibration apply). Default
	// false; router variants only, not live.
	Outcomes bool `yaml:"outcomes"`
}

// Baseline reports whether v is one of the simulator's own pickers.
func (v *Variant) Baseline() bool { return v.Picker != "" && v.Picker != "router" }

// ScenarioNames lists the scenarios built into the package.
func ScenarioNames() []string {
	ents, _ := fs.ReadDir(builtin, "scenarios")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return out
}

// LoadScenario reads a scenario file, or a built-in scenario by name
// ("hotspot", see ScenarioNames).
func LoadScenario(nameOrPath string) (*Scenario, error) {
	data, err := os.ReadFile(nameOrPath)
	dir := filepath.Dir(nameOrPath)
	if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(nameOrPath, `/\.`) {
		data, err = builtin.ReadFile("scenarios/" + nameOrPath + ".yaml")
		dir = ""
		if err != nil {
			return nil, fmt.Errorf("scenario %q: no such file and no built-in scenario of that name (built in: %s)",
				nameOrPath, strings.Join(ScenarioNames(), ", "))
		}
	}
	if err != nil {
		return nil, err
	}
	sc, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nameOrPath, err)
	}
	sc.dir = dir
	return sc, nil
}

// ParseScenario decodes a scenario (unknown fields are errors), fills in the
// defaults and validates it.
func ParseScenario(data []byte) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return nil, err
	}
	sc.defaults()
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return &sc, nil
}

func (sc *Scenario) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if sc.Seed == 0 {
		sc.Seed = 1
	}
	if sc.Pool == "" {
		sc.Pool = "sim"
	}
	def(&sc.BlockTokens, 16)
	def(&sc.Routers, 1)
	if sc.ReportInterval == 0 {
		sc.ReportInterval = Duration(50 * time.Millisecond)
	}
	if sc.Smooth == 0 {
		sc.Smooth = Duration(10 * time.Second)
	}
	for i := range sc.Deployments {
		def(&sc.Deployments[i].MaxBatchTokens, 8192)
		if sc.Deployments[i].DoublingContextTokens == nil {
			c := float64(scheduler.DefaultDoublingContextTokens)
			sc.Deployments[i].DoublingContextTokens = &c
		}
	}
	if sc.Focus == "" && len(sc.Deployments) > 0 {
		sc.Focus = sc.Deployments[len(sc.Deployments)-1].Name
	}
	if len(sc.Variants) == 0 {
		sc.Variants = []Variant{{Name: "default"}}
	}
	for i := range sc.Workload.Classes {
		c := &sc.Workload.Classes[i]
		def(&c.Groups, 1)
		if c.Kind == "" {
			c.Kind = "shared"
		}
		if c.Kind == "conversation" {
			def(&c.Conversations, 100)
			def(&c.MaxPromptTokens, 32768)
			if c.Turns.IsZero() {
				c.Turns = Const(5)
			}
			if c.UserTokens.IsZero() {
				c.UserTokens = c.SuffixTokens
			}
		}
	}
}
