package server

import (
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/decisionlog"
	"github.com/prefixroute/prefixroute/internal/state"
)

// What the daemon needs of a Server besides its services: turning the
// observers on and off, and what the console and the middleware read.

// DefaultDecisionLogBuffer is how many sampled picks the decision log holds
// waiting for the disk before it drops (and counts) new ones.
const DefaultDecisionLogBuffer = decisionlog.DefaultBuffer

// DecisionLogConfig is the decision log's file, sampling and buffer
// (docs/operating.md, "Decision log").
type DecisionLogConfig struct {
	// Path is the file sampled Picks are appended to as JSON lines; ""
	// turns the decision log off.
	Path string
	// Rate is the fraction of Picks sampled, in [0, 1]; 0 logs none.
	Rate float64
	// Buffer bounds the sampled Picks waiting for the disk; more are
	// dropped and counted. Default DefaultDecisionLogBuffer.
	Buffer int
}

// Observe turns the server's observers on: the Pick metrics and the
// console's history ring, the pool and instance gauges, the build info,
// the ramp gauges and the replication metrics on meter, and the decision
// log dl. Call it once, before serving; a Server that is not observed
// records nothing. On error nothing is left open.
func (s *Server) Observe(meter metric.Meter, dl DecisionLogConfig) error {
	obs, err := newObserver(meter, s.reg, s.opts.Now)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	for _, register := range []func(metric.Meter) error{obs.registerGauges, registerBuildInfo, s.registerRampGauges, s.repl.RegisterMetrics, s.flow.RegisterMetrics} {
		if err := register(meter); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	outs, err := newOutcomeObs(meter)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if dl.Path != "" {
		if obs.dlog, err = decisionlog.Open(dl.Path, dl.Rate, dl.Buffer, meter); err != nil {
			return err
		}
	}
	s.obs, s.outcomes = obs, outs
	return nil
}

// CloseDecisionLog writes the decision log's pending lines and closes it,
// within ctx; nil when there is none. Call it once the calls have ended.
func (s *Server) CloseDecisionLog(ctx context.Context) error {
	if s.obs == nil || s.obs.dlog == nil {
		return nil
	}
	return s.obs.dlog.Close(ctx)
}

// Panicked counts a panic a front end or interceptor recovered from, in
// prefixroute_panics_recovered_total. Safe for concurrent use.
func (s *Server) Panicked(ctx context.Context) { s.obs.panicked(ctx) }

// History is the pool's ring of the last frontend.HistorySeconds, for the
// console; false when the server does not track the pool (not observed,
// no pick, report or change yet, or past its ring budget). Safe for
// concurrent use.
func (s *Server) History(pool string) (frontend.History, bool) {
	return s.obs.history(pool, s.opts.Now())
}

// RecentDecisions are the decision log's latest lines of the pool, newest
// first; false when the decision log is off. Safe for concurrent use.
func (s *Server) RecentDecisions(pool string) ([]json.RawMessage, bool) {
	if s.obs == nil || s.obs.dlog == nil {
		return nil, false
	}
	return s.obs.dlog.Recent(pool), true
}

// Admin is the AdminService implementation Register serves, for a front
// end that calls it in-process (the console). Safe for concurrent use.
func (s *Server) Admin() pb.AdminServiceServer { return &adminService{s: s} }

// Limits are the registry's limits in force, defaults applied.
func (s *Server) Limits() state.Limits { return s.reg.Limits() }
