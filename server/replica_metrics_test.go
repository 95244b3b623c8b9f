package server_test

import (
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestReplicaClusterMetrics scrapes a replica's /metrics:
// prefixroute_cluster_link_up is 1 while NATS is there and 0 once it is
// stopped (and 1 again after its restart), and
// prefixroute_cluster_events{direction="published"} grows with every
// report (the peer's received and applied counts follow).
func TestReplicaClusterMetrics(t *testing.T) {
	ns := natstest.Start(t)
	rs := startReplicas(t, ns.URL(), 2)
	r1, r2 := rs[0], rs[1]

	if v := linkUp(t, r1); v != 1 {
		t.Fatalf("prefixroute_cluster_link_up = %v with NATS up, want 1", v)
	}
	events := func(e *servertest.Sidecar, dir string) float64 {
		t.Helper()
		fams := scrape(t, e)
		v, ok := servertest.MetricValue(fams, "prefixroute_cluster_events_total", map[string]string{"direction": dir})
		if !ok {
			t.Fatalf("no single prefixroute_cluster_events_total{direction=%q}; cluster families: %s",
				dir, familyNames(fams, "prefixroute_cluster"))
		}
		return v
	}
	pub0 := events(r1, "published")
	in := report(r1, rep("chat", "a", "a-0"))
	const n = 10
	for range n - 1 {
		in.send(rep("chat", "a", "a-0"))
	}
	// Published counts when the batch is handed to NATS (FlushInterval 1 ms).
	took := servertest.Eventually(t, "published events grow by the reports", func() bool {
		return events(r1, "published") >= pub0+n
	})
	t.Logf("%d reports counted as published after %v", n, took)
	servertest.Eventually(t, "the peer received and applied them", func() bool {
		return events(r2, "received") >= n && events(r2, "applied") >= n
	})
	if pub := events(r1, "published") - pub0; pub != n {
		t.Errorf("published grew by %v for %d reports, want exactly %d", pub, n, n)
	}

	ns.Stop()
	took = servertest.Eventually(t, "link_up 0 after NATS stops", func() bool { return linkUp(t, r1) == 0 && linkUp(t, r2) == 0 })
	t.Logf("link_up 0 on both replicas %v after NATS stopped", took)

	ns.Restart()
	took = servertest.EventuallyWithin(t, 20*time.Second, "link_up 1 after NATS restarts", func() bool { return linkUp(t, r1) == 1 && linkUp(t, r2) == 1 })
	t.Logf("link_up 1 on both replicas %v after NATS restarted", took)
	fams := scrape(t, r1)
	if v, ok := servertest.MetricValue(fams, "prefixroute_cluster_reconnects_total", nil); !ok || v < 1 {
		t.Errorf("prefixroute_cluster_reconnects_total = %v (found %v) after a restart, want >= 1; families: %s",
			v, ok, familyNames(fams, "prefixroute_cluster"))
	}
}
