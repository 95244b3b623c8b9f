package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/rollout"
	"github.com/prefixroute/prefixroute/internal/state"
)

// TestAdminWritesEnforceThePoolLimit gives a router at its pool limit a
// stored pool it does not hold (as a replica's mirror of the cluster's
// configuration leaves one when this replica is full) and sends it every
// kind of admin write: each is refused with ResourceExhausted before
// anything is stored, so the stored ramp stays as it was.
func TestAdminWritesEnforceThePoolLimit(t *testing.T) {
	newServer := func(max int) (*Server, *adminService) {
		s, err := New(Options{DataDir: t.TempDir(), Limits: state.Limits{MaxPools: max},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		closeAtEnd(t, "Server", s)
		return s, &adminService{s: s}
	}
	ctx := context.Background()
	// The configuration of pool "b" with a running ramp, made elsewhere.
	other, otherAdmin := newServer(0)
	if _, err := otherAdmin.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "b", Weights: map[string]float64{"x": 1, "y": 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := otherAdmin.StartRamp(ctx, &pb.StartRampRequest{AllowNewPool: true, Pool: "b", Target: map[string]float64{"x": 0, "y": 1},
		Duration: durationpb.New(10 * time.Minute), StepInterval: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	pcB, _ := other.store.Pool("b")

	s, as := newServer(1)
	if _, err := as.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "a", Weights: map[string]float64{"x": 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Mirror("b", pcB, "test"); err != nil {
		t.Fatal(err)
	}
	id := pcB.Ramp.ID
	for _, c := range []struct {
		name  string
		write func() error
	}{
		{"SetWeights", func() error {
			_, err := as.SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "b", Weights: map[string]float64{"x": 1}})
			return err
		}},
		{"SetPolicy", func() error {
			_, err := as.SetPolicy(ctx, &pb.SetPolicyRequest{AllowNewPool: true, Pool: "b", Policy: &pb.Policy{}})
			return err
		}},
		{"StartRamp", func() error {
			_, err := as.StartRamp(ctx, &pb.StartRampRequest{AllowNewPool: true, Pool: "b", Target: map[string]float64{"x": 1},
				Duration: durationpb.New(time.Minute), StepInterval: durationpb.New(time.Minute)})
			return err
		}},
		{"PauseRamp", func() error { _, err := as.PauseRamp(ctx, &pb.PauseRampRequest{Pool: "b", RampId: id}); return err }},
		{"ResumeRamp", func() error { _, err := as.ResumeRamp(ctx, &pb.ResumeRampRequest{Pool: "b", RampId: id}); return err }},
		{"AbortRamp", func() error { _, err := as.AbortRamp(ctx, &pb.AbortRampRequest{Pool: "b", RampId: id}); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.write(); status.Code(err) != codes.ResourceExhausted {
				t.Errorf("%s of a pool over the limit: %v, want ResourceExhausted", c.name, err)
			}
			pc, _ := s.store.Pool("b")
			if pc.Ramp == nil || pc.Ramp.State != rollout.Running || pc.WeightsVersion != pcB.WeightsVersion {
				t.Errorf("after a refused %s the stored pool changed: ramp %+v, weights version %d (was %d)",
					c.name, pc.Ramp, pc.WeightsVersion, pcB.WeightsVersion)
			}
		})
	}
}
