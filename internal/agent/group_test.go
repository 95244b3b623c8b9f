package agent

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/enginemetrics"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// TestEnginesOnOneLink: two engines of one host, each with its Agent, share
// a BatchLink: the router sees each instance's own cache, their reports
// travel several to a message, and GroupHandler serves both agents' series
// told apart by instance_id.
func TestEnginesOnOneLink(t *testing.T) {
	needStandIn(t)
	cc, err := client.Dial(startRouter(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := pb.NewAdminServiceClient(cc)
	if _, err := admin.SetWeights(t.Context(), &pb.SetWeightsRequest{AllowNewPool: true, Pool: pool, Weights: map[string]float64{"A": 1}}); err != nil {
		t.Fatal(err)
	}
	link, err := client.NewBatchLink(cc, client.BatchLinkOptions{AckInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var agents []*Agent
	var engines []*engine
	for i := range 2 {
		e := startEngine(t, "--dialect", "sglang", "--metrics", "../enginemetrics/testdata/sglang.metrics", "--pub", "tcp://127.0.0.1:0")
		id := fmt.Sprint("gpu-", i)
		agents = append(agents, startAgent(t, cc, Config{Engine: enginemetrics.SGLang, Pool: pool, Deployment: "A", InstanceID: id,
			Address: fmt.Sprintf("10.0.0.1:%d", 8000+i), BlockSize: blockSize, ScrapeInterval: 20 * time.Millisecond, Logger: quiet,
			MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", e.metricsPort), KVEvents: fmt.Sprintf("tcp://127.0.0.1:%d", e.pubPort),
			ReporterMinBackoff: 5 * time.Millisecond, ReporterMaxBackoff: 50 * time.Millisecond, Link: link, LabelMetrics: true}))
		engines = append(engines, e)
	}
	picker, err := client.NewPicker(cc, client.PickerOptions{Pool: pool, BlockSize: blockSize, Timeout: 5 * time.Second,
		Audit: pb.AuditLevel_AUDIT_LEVEL_FULL})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range engines {
		testwait.EventuallyOK(t, func() string {
			if agents[i].Exact() {
				return ""
			}
			e.send(map[string]any{"op": "clear"})
			return fmt.Sprintf("agent %d not precise yet", i)
		})
		p := prompt(1000*(i+1), 2+i)
		e.send(map[string]any{"op": "store", "hashes": []int{1, 2, 3}[:2+i], "parent": nil, "tokens": p})
		testwait.EventuallyOK(t, func() string {
			id := fmt.Sprint("gpu-", i)
			res, err := picker.Pick(t.Context(), client.Request{Tokens: tokens32(p)})
			if err != nil {
				return err.Error()
			}
			for _, in := range res.Response.GetDecision().GetInstances() {
				if in.GetInstanceId() == id && in.GetMatchedBlocks() == uint32(2+i) {
					return ""
				}
			}
			return fmt.Sprintf("%s does not match %d blocks: %v", id, 2+i, res.Response.GetDecision().GetInstances())
		})
	}
	testwait.EventuallyOK(t, func() string {
		if st := link.Stats(); st.Streams != 1 || st.Messages*3 > st.Reports*2 {
			return fmt.Sprintf("link %+v: want one stream and more than 1.5 reports a message", st)
		}
		return ""
	})
	h := GroupHandler(agents)
	testwait.EventuallyOK(t, func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		if rec.Code != http.StatusOK {
			return fmt.Sprintf("healthz %d %s", rec.Code, rec.Body.String())
		}
		return ""
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`prefixagent_cache_precise{instance_id="gpu-0"} 1`, `prefixagent_cache_precise{instance_id="gpu-1"} 1`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, rec.Body.String())
		}
	}
	engines[1].kill()
	testwait.EventuallyOK(t, func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"error":"gpu-1: no successful scrape`) {
			return fmt.Sprintf("healthz after gpu-1's engine died: %d %s", rec.Code, rec.Body.String())
		}
		return ""
	})
}
