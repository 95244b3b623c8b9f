package server

import (
	"go.opentelemetry.io/otel/metric"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/report"
)

// The limits of the report streams, kept here under their daemon-facing
// names; the report engine (internal/report) enforces them.
const (
	MaxBatchReports     = report.MaxBatchReports
	MaxBatchInstances   = report.MaxBatchInstances
	MaxAckIntervalMs    = report.MaxAckIntervalMs
	MaxFirstReportWaits = report.MaxFirstReportWaits
	FlapWindow          = report.FlapWindow
)

// ReportLimits bounds the report streams of a Server (report.Limits).
type ReportLimits = report.Limits

// takeoverOutcome is an outcome of prefixroute_instance_takeovers.
type takeoverOutcome = report.TakeoverOutcome

const numTakeoverOutcomes = report.NumTakeoverOutcomes

var takeoverNames = report.TakeoverNames

// loadService serves LoadService through the report engine.
type loadService struct {
	pb.UnsafeLoadServiceServer
	s *Server
}

// ReportLoad implements LoadService.ReportLoad (report.Engine.ReportLoad).
func (ls *loadService) ReportLoad(stream pb.LoadService_ReportLoadServer) error {
	return ls.s.reports.ReportLoad(stream)
}

// ReportLoadBatch implements LoadService.ReportLoadBatch
// (report.Engine.ReportLoadBatch).
func (ls *loadService) ReportLoadBatch(stream pb.LoadService_ReportLoadBatchServer) error {
	return ls.s.reports.ReportLoadBatch(stream)
}

// LimitReports puts l in force on the Server's report streams (both RPCs)
// and counts their refusals on meter as prefixroute.limit.hits by limit
// (nil: not counted); the instance bindings of the tokens file are checked
// whatever l says. Call it before the Server serves; without it no limit
// applies.
func (s *Server) LimitReports(l ReportLimits, meter metric.Meter) error {
	return s.reports.Limit(l, meter)
}

// OpenReportStreams is how many --max-report-streams slots are held now:
// open report streams plus instances open on ReportLoadBatch streams; 0
// before LimitReports. Safe for concurrent use.
func (s *Server) OpenReportStreams() int64 { return s.reports.OpenStreams() }

// newReports returns the report engine of s.
func newReports(s *Server) *report.Engine {
	return report.New(report.Host{Registry: s.reg, Now: s.opts.Now, Log: s.log, Replicas: kickingReplicas{s.repl, s},
		Metrics: reportMetrics{s}, Status: statusOf, Code: codeOf, Stopping: s.stopping,
		ReportInterval: s.opts.ReportInterval})
}

// reportMetrics counts the report engine's events on the Server's observer,
// read at each call (Observe may set it after New).
type reportMetrics struct{ s *Server }

func (m reportMetrics) Reporting(pool, deployment string) report.Counter {
	return m.s.obs.reporting(pool, deployment)
}

func (m reportMetrics) Takeover(pool string, oc report.TakeoverOutcome) { m.s.obs.takeover(pool, oc) }

func (m reportMetrics) IdentityFlap(pool, deployment string) { m.s.obs.identityFlap(pool, deployment) }

// Reported counts one applied report of d's deployment (report.Counter).
func (d *depObs) Reported() { d.reported() }
