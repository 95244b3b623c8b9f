package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// connectFailed reports whether err is a failed connect (refused, reset
// before an answer, ...), not an error of an answer.
func connectFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// TestDeadInstanceAvoidedAfterOneFailedConnect: an instance whose reporter
// says ok but whose server is gone costs one failed connect, then is no
// longer picked: a gateway built on pkg/client reports the failure
// (Picker.ReportOutcome), retries on another instance, and reports what it
// served through an OutcomeReporter, which the sidecar keeps with the
// picks. Before ReportOutcome, every pick that chose the dead instance
// paid a failed connect.
func TestDeadInstanceAvoidedAfterOneFailedConnect(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	ok := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }
	servers := map[string]*httptest.Server{"a": httptest.NewServer(http.HandlerFunc(ok)), "b": httptest.NewServer(http.HandlerFunc(ok))}
	for id, srv := range servers {
		t.Cleanup(srv.Close)
		reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "d", InstanceID: id, Address: srv.Listener.Addr().String()})
	}
	testwait.Eventually(t, "both instances ok", func() bool {
		a, b := instanceStatus(cc, "m", "a"), instanceStatus(cc, "m", "b")
		return a.GetState() == pb.InstanceState_INSTANCE_STATE_OK && b.GetState() == pb.InstanceState_INSTANCE_STATE_OK
	})
	servers["a"].Close() // a's server dies; its reporter keeps saying ok

	p := newPicker(t, cc, client.PickerOptions{Pool: "m", Timeout: 5 * time.Second})
	outs, err := p.NewOutcomeReporter(client.OutcomeReporterOptions{FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	failed, served := 0, map[string]int{}
	for i := range 40 {
		id := fmt.Sprintf("req-%d", i)
		req := client.Request{Text: fmt.Sprintf("user %d asks", i), RequestID: id, Seed: u64(uint64(i))}
		for try := 0; ; try++ {
			res, err := p.Pick(context.Background(), req)
			if err != nil {
				t.Fatalf("%s try %d: %v", id, try, err)
			}
			start := time.Now()
			resp, err := hc.Get("http://" + res.Address)
			if connectFailed(err) {
				failed++
				if _, err := p.ReportOutcome(context.Background(), client.Outcome{RequestID: id, InstanceID: res.InstanceID,
					Status: pb.OutcomeStatus_OUTCOME_STATUS_CONNECT_FAILED}); err != nil {
					t.Fatal(err)
				}
				req.Exclude = append(req.Exclude, res.InstanceID)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			served[res.InstanceID]++
			outs.Report(client.Outcome{RequestID: id, InstanceID: res.InstanceID, Status: pb.OutcomeStatus_OUTCOME_STATUS_SERVED,
				TTFT: max(time.Since(start), time.Microsecond)})
			break
		}
	}
	if failed != 1 || served["b"] != 40 {
		t.Errorf("%d failed connects, served %v; want 1 failed connect (the dead instance tried once), then b only", failed, served)
	}
	if err := outs.Close(); err != nil {
		t.Fatal(err)
	}
	if st := outs.Stats(); st.Sent != 40 || st.Dropped != 0 || st.Failed != 0 {
		t.Errorf("outcome reporter stats %+v, want 40 sent", st)
	}
	po, found := s.D.Server().PickOutcome("req-39")
	if !found || !po.Reported || po.Status != pb.OutcomeStatus_OUTCOME_STATUS_SERVED || !po.HasTTFT || po.TTFTMs <= 0 || po.Instance != "b" {
		t.Errorf("PickOutcome(req-39) = %+v, %v; want b served with a ttft", po, found)
	}
}

// TestOutcomeReporterOptions: bad options are refused with a message; a
// Report after Close is dropped and counted.
func TestOutcomeReporterOptions(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	p := newPicker(t, dial(t, s.addr), client.PickerOptions{Pool: "m"})
	for _, o := range []client.OutcomeReporterOptions{{MaxBatch: 1025}, {MaxBatch: -1}, {FlushInterval: -1}, {Buffer: -1}} {
		if _, err := p.NewOutcomeReporter(o); err == nil {
			t.Errorf("NewOutcomeReporter(%+v): no error", o)
		}
	}
	r, err := p.NewOutcomeReporter(client.OutcomeReporterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.Report(client.Outcome{InstanceID: "a", Status: pb.OutcomeStatus_OUTCOME_STATUS_SERVED})
	if st := r.Stats(); st.Dropped != 1 || st.Sent != 0 {
		t.Errorf("stats %+v after a Report past Close, want 1 dropped", st)
	}
	// With the sidecar gone, Close says the last flush failed.
	r, err = p.NewOutcomeReporter(client.OutcomeReporterOptions{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s.stop()
	r.Report(client.Outcome{InstanceID: "a", Status: pb.OutcomeStatus_OUTCOME_STATUS_SERVED})
	if err := r.Close(); err == nil {
		t.Error("Close with the sidecar stopped: no error")
	}
	if st := r.Stats(); st.Failed != 1 || st.Sent != 0 {
		t.Errorf("stats %+v, want 1 failed", st)
	}
}
