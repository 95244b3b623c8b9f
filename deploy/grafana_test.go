package deploy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/daemon"
	"github.com/prefixroute/prefixroute/internal/cluster"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
	// Templating holds the variables; a query variable's definition is
	// PromQL too (label_values(METRIC, LABEL)).
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

// metricRef finds metric names in PromQL: our families and otelgrpc's.
var metricRef = regexp.MustCompile(`\b(?:prefixroute|rpc_server)_[a-z0-9_]+\b`)

// TestGrafanaDashboard loads deploy/grafana/prefixroute.json and checks
// that every metric its queries name is exported by a real daemon: one on
// loopback, in a NATS cluster (for the cluster series), with instances
// reporting, weights set and picks made, so that every family has series.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/prefixroute.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/prefixroute.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels: %+v", d)
	}
	used := map[string][]string{} // metric -> panels
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				for _, m := range metricRef.FindAllString(q.Expr, -1) {
					used[m] = append(used[m], p.Title)
				}
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		for _, m := range metricRef.FindAllString(v.Definition, -1) {
			used[m] = append(used[m], "variable $"+v.Name)
		}
	}

	fams := scrapeLiveDaemon(t)
	for m, panels := range used {
		if !exported(fams, m) {
			t.Errorf("panels %q query %s, which the daemon does not export", panels, m)
		}
	}
	// The views the dashboard is for, by the families behind them.
	for _, want := range []string{"prefixroute_picks_total", "prefixroute_pick_duration_seconds_bucket",
		"prefixroute_deployment_weight_share_ratio", "prefixroute_deployment_traffic_share_ratio", "prefixroute_deployment_hit_ratio",
		"prefixroute_instances", "prefixroute_instance_report_age_seconds", "prefixroute_cluster_link_up",
		"prefixroute_cluster_event_lag_seconds", "prefixroute_build_info"} {
		if used[want] == nil {
			t.Errorf("no panel queries %s", want)
		}
	}
	if t.Failed() {
		t.Logf("exported families: %s", strings.Join(familyList(fams), " "))
	}
	t.Logf("%d metrics in %d panels, all exported", len(used), len(d.Panels))
}

// exported reports whether name is a family of fams, or a histogram's
// _bucket, _sum or _count series.
func exported(fams map[string]*dto.MetricFamily, name string) bool {
	if f := fams[name]; f != nil && len(f.GetMetric()) > 0 {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f := fams[base]; f != nil && f.GetType() == dto.MetricType_HISTOGRAM {
				return true
			}
		}
	}
	return false
}

// scrapeLiveDaemon starts a daemon joined to a NATS server, gives it two
// deployments with an instance each, weights and picks (with prefix
// hashes, so hit ratios exist), and returns its parsed /metrics.
func scrapeLiveDaemon(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	ns := natstest.Start(t)
	d := servertest.Start(t, servertest.RealClock(), servertest.Config(func(c *daemon.Config) {
		c.Server.Cluster = &cluster.Config{URLs: []string{ns.URL()}, Name: "r1", FlushInterval: time.Millisecond,
			ApplyTimeout: 5 * time.Second, ReconnectWait: 50 * time.Millisecond, ReconnectJitter: 10 * time.Millisecond}
	})).D
	cc, err := client.Dial(d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	hashes := []uint64{11, 12, 13, 14}
	for _, in := range []struct{ dep, id, addr string }{{"A", "a-1", "10.0.0.1:8000"}, {"B", "b-1", "10.0.0.2:8000"}} {
		r, err := client.NewReporter(cc, client.ReporterOptions{Pool: "chat", Deployment: in.dep, InstanceID: in.id,
			Address: in.addr, CacheEvents: true, Snapshot: func() []uint64 { return hashes },
			Load:   func() client.Load { return client.Load{PrefillTokensPerSecond: 10000, QueueMs: 5, HasQueueMs: true} },
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := r.Close(); err != nil {
				t.Errorf("Reporter.Close: %v", err)
			}
		})
	}
	admin := pb.NewAdminServiceClient(cc)
	ctx := context.Background()
	testwait.Eventually(t, "both instances reporting", func() bool {
		r, err := admin.ListInstances(ctx, &pb.ListInstancesRequest{Pool: "chat"})
		return err == nil && len(r.GetInstances()) == 2
	})
	if _, err := admin.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"A": 3, "B": 1}}); err != nil {
		t.Fatal(err)
	}
	picker, err := client.NewPicker(cc, client.PickerOptions{Pool: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		seed := uint64(i)
		if _, err := picker.Pick(ctx, client.Request{Hashes: hashes, Seed: &seed}); err != nil {
			t.Fatal(err)
		}
	}
	// An error outcome, for the error series: every instance excluded.
	if _, err := picker.Pick(ctx, client.Request{Hashes: hashes, Exclude: []string{"a-1", "b-1"}}); err == nil {
		t.Fatal("Pick excluding every instance: no error")
	}
	var fams map[string]*dto.MetricFamily
	testwait.Eventually(t, "the cluster link and the per-deployment series on /metrics", func() bool {
		fams = scrape(t, "http://"+d.HTTPAddr()+"/metrics")
		return exported(fams, "prefixroute_cluster_link_up") && exported(fams, "prefixroute_deployment_hit_ratio")
	})
	return fams
}

// scrape fetches and parses a /metrics page with expfmt.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return fams
}

// familyList is for debugging a failure: the exported families.
func familyList(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for n := range fams {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }
