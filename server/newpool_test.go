package server_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// TestWriteToUnknownPool: a configuration write to a pool the router does
// not know is NotFound, naming the pool and allow_new_pool, and creates
// nothing; with allow_new_pool it creates the pool; a pool known from its
// instances or its configuration needs no flag.
func TestWriteToUnknownPool(t *testing.T) {
	e := servertest.Start(t)
	report(e, rep("live", "d", "a"))
	w := map[string]float64{"d": 1}
	ramp := func(pool string, allow bool) error {
		_, err := e.Admin.StartRamp(ctx(t), &pb.StartRampRequest{Pool: pool, Target: w, Duration: durationpb.New(60e9),
			StepInterval: durationpb.New(60e9), AllowNewPool: allow, AllowDrain: true})
		return err
	}
	for _, tc := range []struct {
		name  string
		write func(pool string, allow bool) error
	}{
		{"SetWeights", func(pool string, allow bool) error {
			_, err := e.Admin.SetWeights(ctx(t), &pb.SetWeightsRequest{Pool: pool, Weights: w, AllowNewPool: allow, AllowDrain: true})
			return err
		}},
		{"SetPolicy", func(pool string, allow bool) error {
			_, err := e.Admin.SetPolicy(ctx(t), &pb.SetPolicyRequest{Pool: pool, Policy: &pb.Policy{DeltaMs: f64(10)}, AllowNewPool: allow})
			return err
		}},
		{"StartRamp", ramp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typo := "chta-" + tc.name
			wantCode(t, tc.write(typo, false), codes.NotFound, `"`+typo+`"`, "allow_new_pool", "--create")
			_, err := e.Admin.GetWeights(ctx(t), &pb.GetWeightsRequest{Pool: typo})
			wantCode(t, err, codes.NotFound)
			if err := tc.write(typo, true); err != nil {
				t.Fatalf("with allow_new_pool: %v", err)
			}
			if _, err := e.Admin.GetWeights(ctx(t), &pb.GetWeightsRequest{Pool: typo}); err != nil {
				t.Errorf("the pool created with allow_new_pool: %v", err)
			}
			if tc.name != "StartRamp" { // a ramp owns the weights
				if err := tc.write(typo, false); err != nil {
					t.Errorf("a configured pool, without allow_new_pool: %v", err)
				}
			}
			if err := tc.write("live", false); err != nil && tc.name != "StartRamp" {
				t.Errorf("a pool with instances, without allow_new_pool: %v", err)
			}
		})
	}
}
