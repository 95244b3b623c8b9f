package server

// Test helpers of this package that the external test package server_test
// uses too, so that /metrics is fetched and read one way in both.
var (
	// ScrapeMetrics fetches a daemon's /metrics and parses it (obsScrape).
	ScrapeMetrics = obsScrape
	// MetricValue is the value of the one counter or gauge series of a
	// family whose labels match, and whether exactly one matched
	// (obsValueOK).
	MetricValue = obsValueOK
)
