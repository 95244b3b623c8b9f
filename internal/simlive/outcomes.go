package simlive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/protoconv"
	"github.com/prefixroute/prefixroute/internal/sim"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// requestID is the PickRequest.request_id of request id, which its
// outcome carries back.
func requestID(id uint64) string { return "sim-" + strconv.FormatUint(id, 10) }

// shedKind tells a refusal for load from an error: 0 none, 1 shed for
// saturation (RESOURCE_EXHAUSTED without a reason), 2 shed because no
// instance could meet the TTFT target (reason SLO_UNATTAINABLE).
func shedKind(err error) int {
	if err == nil || status.Code(err) != codes.ResourceExhausted {
		return 0
	}
	if protoconv.ReasonOf(err) == protoconv.ReasonSLOUnattainable {
		return 2
	}
	return 1
}

// noteChoice sets r's target and the router's predicted TTFT of the
// chosen instance and its queue ahead (the decision's predicted_ttft_ms
// and queue_ms, wall-clock ms, in virtual ms).
func (lr *liveRun) noteChoice(r *sim.Request, res *client.Result) {
	for _, d := range res.Response.GetDecision().GetInstances() {
		if d.GetInstanceId() == res.InstanceID {
			r.PredictedHit = r.PromptTokens - min(r.PromptTokens, d.GetUncachedTokens())
			r.PredictedMs = d.GetPredictedTtftMs() * lr.opts.Speed
			r.PredictedQueueMs = d.GetQueueMs() * lr.opts.Speed
		}
	}
}

// startOutcomes starts one OutcomeReporter per replica when the variant
// reports outcomes: a request's outcome goes to the replica that picked it.
func (lr *liveRun) startOutcomes() error {
	if !lr.outcomes {
		return nil
	}
	lr.picked = make(map[uint64]int)
	for _, p := range lr.pickers {
		o, err := p.NewOutcomeReporter(client.OutcomeReporterOptions{OnError: func(err error) {
			lr.opts.Logger.Warn("ReportOutcome failed", "err", err)
		}})
		if err != nil {
			return errors.Join(err, lr.closeOutcomes())
		}
		lr.outReporters = append(lr.outReporters, o)
	}
	lr.d.OnServed(lr.served)
	return nil
}

// served reports r's first token to the replica that picked it: status
// served, the TTFT in wall-clock time, the pick's request_id. Called from
// the loop's goroutine.
func (lr *liveRun) served(r *sim.Request) {
	rep, ok := lr.picked[r.ID]
	if !ok {
		return
	}
	delete(lr.picked, r.ID)
	ttft := time.Duration(float64(r.FirstToken-r.Arrival) / lr.opts.Speed)
	lr.outReporters[rep].Report(client.Outcome{RequestID: requestID(r.ID), InstanceID: lr.insts[r.Instance].ID,
		Status: pb.OutcomeStatus_OUTCOME_STATUS_SERVED, TTFT: ttft})
}

// closeOutcomes sends the outcomes left and stops the reporters.
func (lr *liveRun) closeOutcomes() error {
	var errs []error
	for _, o := range lr.outReporters {
		errs = append(errs, o.Close())
	}
	return errors.Join(errs...)
}

// outcomeStats counts what the reporters sent and reads the router's fits
// (the first replica's) after the last outcome went out.
func (lr *liveRun) outcomeStats(admin pb.AdminServiceClient) (*sim.LiveOutcomes, error) {
	if !lr.outcomes {
		return nil, nil
	}
	out := &sim.LiveOutcomes{}
	for _, o := range lr.outReporters {
		s := o.Stats()
		out.Sent, out.Dropped, out.Failed = out.Sent+s.Sent, out.Dropped+s.Dropped, out.Failed+s.Failed
	}
	ctx, cancel := context.WithTimeout(lr.ctx, 5*time.Second)
	defer cancel()
	resp, err := admin.GetSloCalibration(ctx, &pb.GetSloCalibrationRequest{Pool: lr.d.Pool()})
	if err != nil {
		return nil, fmt.Errorf("GetSloCalibration: %w", err)
	}
	for _, f := range resp.GetDeployments() {
		out.Fits = append(out.Fits, sim.LiveFit{Deployment: f.GetDeployment(), Version: f.GetVersion(), Accepted: f.GetAccepted(),
			Ignored: f.GetIgnored(), Clipped: f.GetClipped(), PrefillScale: f.GetPrefillScale(),
			DoublingContextTokens: f.GetDoublingContextTokens(), InUse: f.GetInUse()})
	}
	return out, nil
}
