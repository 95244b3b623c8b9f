package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestPickDispatchSpacing: through gRPC, with dispatch_spacing_ms 200 the
// first pick for an idle instance is answered at once and the next, priced
// behind the first's 410 ms of prefill, is held until 200 ms after the
// first's answer (dispatch_hold_ms in its audit, and the call takes at
// least that long); a call whose deadline falls inside the hold ends
// DEADLINE_EXCEEDED; a later pick for an instance idle again by its report
// is not held; an out-of-range spacing is refused with the field's range.
func TestPickDispatchSpacing(t *testing.T) {
	e := servertest.Start(t)
	defer e.Stop()
	in := report(e, rep("m", "d", "a"))
	if _, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: "m", Policy: &pb.Policy{DispatchSpacingMs: f64(200)}}); err != nil {
		t.Fatal(err)
	}
	// 4,096 tokens at 10,000 tokens/s: 409.6 ms of prefill each.
	req := &pb.PickRequest{Pool: "m", PromptTokens: 4096, Seed: u64(1), Audit: pb.AuditLevel_AUDIT_LEVEL_CHOSEN}
	first, err := e.Pick.Pick(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if h := first.GetDecision().GetDispatchHoldMs(); h != 0 {
		t.Fatalf("first pick held %.1f ms, want 0 (nothing picked for the instance before)", h)
	}
	start := time.Now()
	second, err := e.Pick.Pick(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	h := second.GetDecision().GetDispatchHoldMs()
	if h <= 0 || h > 200 {
		t.Fatalf("second pick held %.1f ms, want in (0, 200] ms", h)
	}
	if took < time.Duration(h*float64(time.Millisecond)) {
		t.Fatalf("second pick answered after %v, before its hold of %.1f ms ended", took, h)
	}
	short, cancel := context.WithTimeout(ctx(t), 20*time.Millisecond)
	defer cancel()
	_, err = e.Pick.Pick(short, req)
	wantCode(t, err, codes.DeadlineExceeded)

	// The instance reports itself idle (its picks done): a pick 200 ms
	// after the last answer is not held.
	time.Sleep(250 * time.Millisecond)
	in.send(rep("m", "d", "a"))
	third, err := e.Pick.Pick(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if h := third.GetDecision().GetDispatchHoldMs(); h != 0 {
		t.Fatalf("pick after the spacing held %.1f ms, want 0", h)
	}
	_, err = e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: "m", Policy: &pb.Policy{DispatchSpacingMs: f64(1001)}})
	wantCode(t, err, codes.InvalidArgument, "dispatch_spacing_ms must be in [0, 1000] ms, got 1001")
}
