package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
)

// result is what one load test measured.
type result struct {
	elapsed              time.Duration
	acks                 int64 // reports sent in the window and acknowledged
	picks, pickErrs      int64
	sendErrs, streamErrs int64
	latency              []time.Duration // of the successful picks
	hwmKB, rssKB         int64
	daemonCPU            time.Duration
	windowCPU, selfCPU   time.Duration // the daemon's and the generator's own, in the window
	offered, notSent     int64         // open loop: Picks due, and those no caller was free to send
	firstErrs            []string
	server               histogram // the daemon's Pick latency in the window
}

func (r *result) errors() int64 { return r.pickErrs + r.sendErrs + r.streamErrs }

// quantile is the q-quantile of sorted durations.
func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// print writes the result as a Markdown table.
func (r *result) print(w io.Writer, c config) {
	slices.Sort(r.latency)
	sec := r.elapsed.Seconds()
	mode := "closed loop"
	if c.pickRate > 0 {
		mode = fmt.Sprintf("%g Picks/s offered", c.pickRate)
	}
	fmt.Fprintf(w, "prefixload: %d instances%s x %g reports/s (%d events each, kv_capacity_blocks %d, acks every %v), %d Pick callers (%s), %d pools x %d deployments, auth %v, %v measured after %v warm-up, GOMAXPROCS %d (load generator and daemon share the machine)\n\n",
		c.streams, batchNote(c.batch), c.rate, c.events, c.capacity, ackEvery(c.ackInterval), c.pickers, mode, c.pools, c.deps, c.auth, r.elapsed.Round(time.Millisecond), c.warmUp, runtime.GOMAXPROCS(0))
	fmt.Fprintln(w, "| measure | value |")
	fmt.Fprintln(w, "|---|---:|")
	fmt.Fprintf(w, "| errors (picks + stream sends + streams ended) | %d (%d + %d + %d) |\n", r.errors(), r.pickErrs, r.sendErrs, r.streamErrs)
	fmt.Fprintf(w, "| picks | %d (%.0f/s) |\n", r.picks, float64(r.picks)/sec)
	if c.pickRate > 0 {
		fmt.Fprintf(w, "| picks due, not sent (every caller busy) | %d of %d |\n", r.notSent, r.offered)
	}
	fmt.Fprintf(w, "| Pick p50 / p90 / p99 / max (client-side) | %v / %v / %v / %v |\n",
		quantile(r.latency, 0.5).Round(time.Microsecond), quantile(r.latency, 0.9).Round(time.Microsecond),
		quantile(r.latency, 0.99).Round(time.Microsecond), quantile(r.latency, 1).Round(time.Microsecond))
	if r.server != nil {
		fmt.Fprintf(w, "| Pick p50 / p99 in the daemon (prefixroute_pick_duration, interpolated in its buckets) | %v / %v |\n",
			r.server.quantile(0.5).Round(time.Microsecond), r.server.quantile(0.99).Round(time.Microsecond))
	}
	fmt.Fprintf(w, "| reports ingested (acked) | %d (%.0f/s; offered %.0f/s) |\n", r.acks, float64(r.acks)/sec, float64(c.streams)*c.rate)
	fmt.Fprintf(w, "| daemon peak RSS (VmHWM) | %.1f MiB |\n", float64(r.hwmKB)/1024)
	fmt.Fprintf(w, "| daemon RSS at the end (VmRSS) | %.1f MiB |\n", float64(r.rssKB)/1024)
	fmt.Fprintf(w, "| daemon CPU, whole run | %v |\n", r.daemonCPU.Round(10*time.Millisecond))
	fmt.Fprintf(w, "| daemon CPU in the window | %v (%.2f cores) |\n", r.windowCPU.Round(10*time.Millisecond), r.windowCPU.Seconds()/sec)
	if r.acks > 0 {
		fmt.Fprintf(w, "| daemon CPU per acked report, the Picks' share included | %.1f µs |\n", float64(r.windowCPU.Microseconds())/float64(r.acks))
	}
	fmt.Fprintf(w, "| load generator CPU in the window (apart) | %v (%.2f cores) |\n", r.selfCPU.Round(10*time.Millisecond), r.selfCPU.Seconds()/sec)
	for _, e := range r.firstErrs {
		fmt.Fprintf(w, "\nerror: %s", e)
	}
	fmt.Fprintln(w)
}

// ackEvery names the streams' ack interval.
func ackEvery(d time.Duration) string {
	if d.Milliseconds() <= 0 {
		return "report"
	}
	return d.String()
}

// batchNote says how the instances' reports travel.
func batchNote(n int) string {
	if n <= 1 {
		return " (a ReportLoad stream each)"
	}
	return fmt.Sprintf(" (%d per ReportLoadBatch stream and message)", n)
}
