package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// holdAnswer waits out a pick's dispatch hold (state.Pick.Hold, policy
// dispatch_spacing_ms) before its answer leaves, and records the hold in
// the response's decision. A call that ends during the hold gets CANCELLED
// or DEADLINE_EXCEEDED; its pick stays counted on the instance until the
// instance's next report, as for a gateway that drops a request after its
// pick. Safe for concurrent use.
func holdAnswer(ctx context.Context, pool string, hold time.Duration, resp *pb.PickResponse) error {
	if hold <= 0 {
		return nil
	}
	if resp.Decision != nil {
		resp.Decision.DispatchHoldMs = float64(hold) / float64(time.Millisecond)
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		st := status.FromContextError(ctx.Err())
		return status.Error(st.Code(), fmt.Sprintf("pool %q: the call ended during the pick's dispatch hold of %.1f ms (dispatch_spacing_ms): %v",
			pool, float64(hold)/float64(time.Millisecond), ctx.Err()))
	}
}
