package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/decisionlog"
)

// TestDecisionLogWritesEveryPickAtRateOne logs every Pick of a real daemon,
// shuts it down, and reads the file back: one line per pick, with the
// request summary and a response that protojson parses into the decision
// the client got, or into the full audit when the client asked for none.
func TestDecisionLogWritesEveryPickAtRateOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	d := obsStart(t, func(c *Config) { c.DecisionLog, c.DecisionLogRate = path, 1 })
	pick, load, _ := obsClients(t, d)
	obsConnect(t, load).report(&pb.ReportLoadRequest{Pool: "p", Deployment: "d", InstanceId: "i", Address: "10.0.0.1:1"})
	var got []*pb.PickResponse
	for i := range 5 {
		seed := uint64(100 + i)
		resp, err := pick.Pick(context.Background(), &pb.PickRequest{Pool: "p", PrefixHashes: []uint64{7, 8, 9}, PromptTokens: 48,
			RequestId: "req-" + strconv.Itoa(i), Seed: &seed})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp)
	}
	bare, err := pick.Pick(context.Background(), &pb.PickRequest{Pool: "p", Audit: pb.AuditLevel_AUDIT_LEVEL_NONE})
	if err != nil || bare.GetDecision() != nil {
		t.Fatalf("Pick without audit: %v, %v", bare, err)
	}
	if _, err := pick.Pick(context.Background(), &pb.PickRequest{Pool: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Pick of an unknown pool: %v", err)
	}
	fams := obsScrape(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // opened for reading
	var lines []decisionlog.Line
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l decisionlog.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7", len(lines))
	}
	for i, l := range lines[:5] {
		var req pb.PickRequest
		var resp pb.PickResponse
		if err := protojson.Unmarshal(l.Request, &req); err != nil {
			t.Fatalf("line %d request: %v", i, err)
		}
		if err := protojson.Unmarshal(l.Response, &resp); err != nil {
			t.Fatalf("line %d response: %v", i, err)
		}
		switch {
		case l.Code != "OK" || l.PrefixBlocks != 3 || l.FirstHash != "7" || l.LastHash != "9":
			t.Errorf("line %d: code %s, %d blocks, hashes %s..%s", i, l.Code, l.PrefixBlocks, l.FirstHash, l.LastHash)
		case req.GetPool() != "p" || req.GetRequestId() != "req-"+strconv.Itoa(i) || req.GetSeed() != uint64(100+i) || len(req.GetPrefixHashes()) != 0:
			t.Errorf("line %d request summary: %v", i, &req)
		case resp.GetInstanceId() != got[i].GetInstanceId() || resp.GetDecision().GetSeed() != got[i].GetDecision().GetSeed() ||
			len(resp.GetDecision().GetInstances()) != 1:
			t.Errorf("line %d response %v, client got %v", i, &resp, got[i])
		case !(l.DurationSeconds > 0) || l.Time.IsZero():
			t.Errorf("line %d: time %v, duration %v", i, l.Time, l.DurationSeconds)
		}
	}
	var full pb.PickResponse
	var req pb.PickRequest
	if err := protojson.Unmarshal(lines[5].Response, &full); err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(lines[5].Request, &req); err != nil {
		t.Fatal(err)
	}
	if req.GetAudit() != pb.AuditLevel_AUDIT_LEVEL_NONE || full.GetInstanceId() != bare.GetInstanceId() ||
		len(full.GetDecision().GetInstances()) != 1 || full.GetDecision().GetSeed() == 0 {
		t.Errorf("a pick without audit is logged with request %v and response %v; want the full audit", &req, &full)
	}
	if l := lines[6]; l.Code != "NotFound" || l.Error == "" || len(l.Response) != 0 {
		t.Errorf("failed pick's line: %+v", l)
	}
	if got := obsValue(t, fams, "prefixroute_decision_log_dropped_total", nil); got != 0 {
		t.Errorf("dropped = %v, want 0", got)
	}
}
