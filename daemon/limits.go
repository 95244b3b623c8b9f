package daemon

import (
	"fmt"
	"time"
)

// TransportLimits bounds what connections and report streams may cost the
// daemon. Zero fields take the defaults stated. SECURITY.md has the whole
// limits table.
type TransportLimits struct {
	// MaxConnections bounds the open gRPC connections; more wait in the
	// listen backlog until one closes. Default 16384.
	MaxConnections int
	// MaxReportStreams bounds the open report streams of the daemon (and
	// the instances of ReportLoadBatch streams); one more ends at once
	// with ResourceExhausted. Default 16384.
	MaxReportStreams int
	// ReportsPerSecond and ReportBurst are the token bucket of every report
	// stream (and of every instance on a ReportLoadBatch stream): a report
	// past it ends the stream with ResourceExhausted naming the limit.
	// Defaults 50 reports/s (the router asks for one every 100 ms), burst
	// 1000. The bucket counts reports as the router reads them, so the
	// burst must hold what queues up while the router is behind (a stall
	// of 100 s at 10 reports/s).
	ReportsPerSecond float64
	ReportBurst      int
	// FirstReportTimeout is how long a new ReportLoad stream may wait
	// before its first report; then it ends with DeadlineExceeded. It is
	// also how long a ReportLoadBatch stream may carry no open instance;
	// then it ends with FailedPrecondition. Default 10s.
	FirstReportTimeout time.Duration
}

// Default transport limits.
const (
	DefaultMaxConnections     = 16384
	DefaultMaxReportStreams   = 16384
	DefaultReportsPerSecond   = 50
	DefaultReportBurst        = 1000
	DefaultFirstReportTimeout = 10 * time.Second
)

// withDefaults returns l with every zero field set to its default.
func (l TransportLimits) withDefaults() TransportLimits {
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.MaxReportStreams <= 0 {
		l.MaxReportStreams = DefaultMaxReportStreams
	}
	if l.ReportsPerSecond <= 0 {
		l.ReportsPerSecond = DefaultReportsPerSecond
	}
	if l.ReportBurst <= 0 {
		l.ReportBurst = DefaultReportBurst
	}
	if l.FirstReportTimeout <= 0 {
		l.FirstReportTimeout = DefaultFirstReportTimeout
	}
	return l
}

// String is the limits in force, for the start-up log line.
func (l TransportLimits) String() string {
	return fmt.Sprintf("connections=%d report_streams=%d reports_per_second=%g burst=%d first_report_timeout=%v",
		l.MaxConnections, l.MaxReportStreams, l.ReportsPerSecond, l.ReportBurst, l.FirstReportTimeout)
}
