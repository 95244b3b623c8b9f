package server_test

import (
	"context"
	"maps"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/natstest"
	"github.com/prefixroute/prefixroute/internal/servertest"
)

// processClients dials a child prefixrouted.
func processClients(t *testing.T, p *process) (pb.PickServiceClient, pb.LoadServiceClient, pb.AdminServiceClient) {
	t.Helper()
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewPickServiceClient(conn), pb.NewLoadServiceClient(conn), pb.NewAdminServiceClient(conn)
}

func kill9(t *testing.T, p *process) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err == nil {
		t.Fatal("expected the process to die of SIGKILL")
	}
}

// TestReplicaKill9LosesNoAckedChange: replicas are real prefixrouted
// processes joined through NATS. A SetWeights acknowledged by replica A is
// in the bucket before the ack: with A killed (-9) right after it, B has
// the weights, and A restarted with NATS down has them too (kept in its
// data dir before the ack). A change made on B while A is dead reaches A
// when A restarts with NATS up (it serves it from its first call).
// Restarted with NATS down, A starts on its local last-known copy: it
// routes with those weights and refuses changes with Unavailable.
func TestReplicaKill9LosesNoAckedChange(t *testing.T) {
	ns := natstest.Start(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	natsArgs := func(name string) []string { return []string{"--nats", ns.URL(), "--nats-name", name} }
	a := startProcess(t, dirA, natsArgs("A")...)
	b := startProcess(t, dirB, natsArgs("B")...)
	_, _, adminA := processClients(t, a)
	_, _, adminB := processClients(t, b)
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Two changes in a row on A, then kill -9 at once.
	w2 := map[string]float64{"a": 1, "b": 4}
	for i, w := range []map[string]float64{{"a": 9, "b": 1}, w2} {
		r, err := adminA.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: w, ExpectedVersion: uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetVersion() != uint64(i+1) {
			t.Fatalf("version %d, want %d", r.GetVersion(), i+1)
		}
	}
	kill9(t, a)
	took := servertest.Eventually(t, "B has A's acknowledged weights", func() bool {
		w, err := adminB.GetWeights(c, &pb.GetWeightsRequest{Pool: "m"})
		return err == nil && w.GetVersion() == 2 && maps.Equal(w.GetWeights(), w2)
	})
	t.Logf("A's last acked change on B %v after A was killed", took)

	// A restarts with NATS down: its own acknowledged change was kept in
	// its data dir before the ack.
	ns.Stop()
	a = startProcess(t, dirA, natsArgs("A")...)
	_, _, adminA = processClients(t, a)
	w, err := adminA.GetWeights(c, &pb.GetWeightsRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if w.GetVersion() != 2 || !maps.Equal(w.GetWeights(), w2) {
		t.Fatalf("A restarted with NATS down after kill -9: version %d weights %v, want 2 %v", w.GetVersion(), w.GetWeights(), w2)
	}
	kill9(t, a)

	// A change on B while A is dead (once NATS is back).
	ns.Restart()
	w3 := map[string]float64{"a": 0, "b": 1}
	took = servertest.EventuallyWithin(t, 30*time.Second, "SetWeights on B after NATS restarted", func() bool {
		_, err := adminB.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: w3, ExpectedVersion: 2})
		return err == nil
	})
	t.Logf("B's first SetWeights accepted %v after NATS restarted", took)

	// A restarts with NATS up: it has B's change from its first answer.
	a = startProcess(t, dirA, natsArgs("A")...)
	_, _, adminA = processClients(t, a)
	w, err = adminA.GetWeights(c, &pb.GetWeightsRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if w.GetVersion() != 3 || !maps.Equal(w.GetWeights(), w3) {
		t.Fatalf("A restarted with NATS up: version %d weights %v, want 3 %v", w.GetVersion(), w.GetWeights(), w3)
	}

	// A restarts with NATS down: it starts on its local copy.
	kill9(t, a)
	ns.Stop()
	started := time.Now()
	a = startProcess(t, dirA, natsArgs("A")...)
	t.Logf("A restarted with NATS down serving after %v", time.Since(started))
	pickA, loadA, adminA := processClients(t, a)
	w, err = adminA.GetWeights(c, &pb.GetWeightsRequest{Pool: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if w.GetVersion() != 3 || !maps.Equal(w.GetWeights(), w3) {
		t.Fatalf("A restarted with NATS down: version %d weights %v, want 3 %v", w.GetVersion(), w.GetWeights(), w3)
	}
	for _, id := range []string{"a-0", "b-0"} {
		st, err := loadA.ReportLoad(c)
		if err != nil {
			t.Fatal(err)
		}
		m := rep("m", id[:1], id)
		m.Seq = 1
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		seed := uint64(i)
		p, err := pickA.Pick(c, &pb.PickRequest{Pool: "m", PromptTokens: 64, Seed: &seed})
		if err != nil {
			t.Fatalf("Pick on A with NATS down: %v", err)
		}
		if p.GetDeployment() != "b" || p.GetDecision().GetWeightsVersion() != 3 {
			t.Fatalf("Pick on A with NATS down went to %s with weights version %d; want b (a has weight 0) and version 3",
				p.GetDeployment(), p.GetDecision().GetWeightsVersion())
		}
	}
	_, err = adminA.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"a": 1}})
	wantCode(t, err, codes.Unavailable, "nothing was changed")
	_, err = adminA.SetPolicy(c, &pb.SetPolicyRequest{AllowNewPool: true, Pool: "m", Policy: &pb.Policy{DeltaMs: f64(30)}})
	wantCode(t, err, codes.Unavailable, "nothing was changed")

	// NATS comes back: A, which started without it, joins in the
	// background; its changes are accepted again and reach B.
	ns.Restart()
	w4 := map[string]float64{"a": 1, "b": 1}
	took = servertest.EventuallyWithin(t, 30*time.Second, "SetWeights on A once NATS is back", func() bool {
		_, err := adminA.SetWeights(c, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: w4, ExpectedVersion: 3})
		return err == nil
	})
	t.Logf("A, started without NATS, accepted a change %v after NATS came back", took)
	servertest.Eventually(t, "A's change on B", func() bool {
		w, err := adminB.GetWeights(c, &pb.GetWeightsRequest{Pool: "m"})
		return err == nil && w.GetVersion() == 4 && maps.Equal(w.GetWeights(), w4)
	})
}
