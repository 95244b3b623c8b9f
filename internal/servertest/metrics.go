package servertest

import (
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics fetches the sidecar's /metrics and parses the text exposition;
// a failure fails the test.
func (s *Sidecar) Metrics() map[string]*dto.MetricFamily {
	s.T.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		s.T.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.T.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		s.T.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// MetricValue is the value of the one counter or gauge series of family
// name whose labels match want (a label wanted "" must be absent), and
// whether exactly one matched.
func MetricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	var found *dto.Metric
	n := 0
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && have[k] == v
		}
		if ok {
			found, n = m, n+1
		}
	}
	switch {
	case n != 1:
		return 0, false
	case found.GetCounter() != nil:
		return found.GetCounter().GetValue(), true
	case found.GetGauge() != nil:
		return found.GetGauge().GetValue(), true
	}
	return 0, false
}
