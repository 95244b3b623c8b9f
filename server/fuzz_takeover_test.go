package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/auth"
	"github.com/prefixroute/prefixroute/internal/state"
	"github.com/prefixroute/prefixroute/internal/streamtest"
)

// fuzzBound are the bound instance identities FuzzReportBound reports as:
// each is bound to deployment b of pool chat (fuzzPool), one to b's own
// instance b-1, one to the id of deployment a's instance a-1.
var fuzzBound = []struct{ name, bind string }{
	{"inst-b", "{pool: chat, deployment: b}"},
	{"inst-b-b1", "{pool: chat, deployment: b, instance_id: b-1}"},
	{"inst-b-a1", "{pool: chat, deployment: b, instance_id: a-1}"},
}

// fuzzAuthorizer is an Authenticator on a tokens file of fuzzBound.
func fuzzAuthorizer(t *testing.T) *auth.Authenticator {
	var b strings.Builder
	b.WriteString("identities:\n")
	for _, id := range fuzzBound {
		fmt.Fprintf(&b, "  - name: %s\n    roles: [instance]\n    token_sha256: %s\n    bind: %s\n",
			id.name, auth.HashToken(fuzzToken(id.name)), id.bind)
	}
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.NewAuthenticator(file, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func fuzzToken(name string) string { return "fuzz-token-of-" + name + "-0123456789abcdef" }

// outsideB is everything of pool chat a stream bound to deployment b must
// leave alone: the instances of other deployments as they are, and the
// deployments' shares; and the names of the pools.
func outsideB(s *Server) (insts []state.InstanceStatus, deps []state.DeploymentWeight, pools []string) {
	for _, p := range s.reg.Pools() {
		pools = append(pools, p.Name())
	}
	p, err := s.reg.Pool("chat")
	if err != nil {
		return nil, nil, pools
	}
	for _, in := range p.Instances(fuzzNow) {
		if in.Deployment != "b" {
			insts = append(insts, in)
		}
	}
	for _, d := range p.Deployments() {
		if d.Deployment != "b" {
			d.Instances = -1 // b's instances change the split's denominator, not a's
			deps = append(deps, d)
		}
	}
	slices.Sort(pools)
	return insts, deps, pools
}

// FuzzReportBound: no sequence of reports, on either RPC, by an identity
// bound to deployment b changes another deployment's instances (identity,
// state, load, cached blocks), its share of Picks, or any other pool.
func FuzzReportBound(f *testing.F) {
	for _, batch := range []bool{false, true} {
		for who := range uint8(len(fuzzBound)) {
			take, _ := proto.Marshal(&pb.ReportLoadRequest{Pool: "chat", Deployment: "b", InstanceId: "a-1", Address: "evil:1", Seq: 9,
				PrefillTokensPerSecond: 1e9})
			own, _ := proto.Marshal(&pb.ReportLoadRequest{Pool: "chat", Deployment: "b", InstanceId: "b-1", Address: "b-1:8000", Seq: 2})
			if batch {
				take, _ = proto.Marshal(&pb.ReportLoadBatchRequest{Reports: []*pb.ReportLoadRequest{
					{Pool: "chat", Deployment: "b", InstanceId: "b-1", Address: "b-1:8000", Seq: 2},
					{Pool: "chat", Deployment: "b", InstanceId: "a-2", Address: "evil:1", Seq: 3}}})
				own, _ = proto.Marshal(&pb.ReportLoadBatchRequest{Closed: []*pb.InstanceRef{{Pool: "chat", InstanceId: "a-1"}}})
			}
			f.Add(who, batch, take, own, []byte(nil))
		}
	}
	f.Fuzz(func(t *testing.T, who uint8, batch bool, m1, m2, m3 []byte) {
		raws := [][]byte{m1, m2, m3}
		s := fuzzServer(t)
		fuzzPool(t, s)
		id := fuzzBound[int(who)%len(fuzzBound)].name
		md := metadata.Pairs("authorization", "Bearer "+fuzzToken(id))
		ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), md))
		defer cancel()
		ctx, err := fuzzAuthorizer(t).Authorize(ctx, pb.LoadService_ReportLoad_FullMethodName)
		if err != nil {
			t.Fatal(err)
		}
		insts, deps, pools := outsideB(s)
		if batch {
			var msgs []*pb.ReportLoadBatchRequest
			for _, raw := range raws {
				m := new(pb.ReportLoadBatchRequest)
				if proto.Unmarshal(raw, m) != nil {
					return
				}
				msgs = append(msgs, m)
			}
			st := &streamtest.Stream[pb.ReportLoadBatchRequest, pb.ReportLoadBatchResponse]{Ctx: ctx, In: msgs}
			_ = (&loadService{s: s}).ReportLoadBatch(st)
		} else {
			var msgs []*pb.ReportLoadRequest
			for _, raw := range raws {
				m := new(pb.ReportLoadRequest)
				if proto.Unmarshal(raw, m) != nil {
					return
				}
				msgs = append(msgs, m)
			}
			st := &streamtest.Stream[pb.ReportLoadRequest, pb.ReportLoadResponse]{Ctx: ctx, In: msgs}
			_ = (&loadService{s: s}).ReportLoad(st)
		}
		i2, d2, p2 := outsideB(s)
		if !reflect.DeepEqual(i2, insts) {
			t.Fatalf("%s changed other deployments' instances:\n%+v\nwas\n%+v", id, i2, insts)
		}
		if !reflect.DeepEqual(d2, deps) {
			t.Fatalf("%s changed other deployments' shares: %+v, was %+v", id, d2, deps)
		}
		if !slices.Equal(p2, pools) {
			t.Fatalf("%s changed the pools: %q, was %q", id, p2, pools)
		}
	})
}
