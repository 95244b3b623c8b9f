package replica

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/cluster"
)

// TestEventsForFlowControl: what flow control needs from another
// replica's events. A batch holding a load report calls Options.Freed
// with the pool once (its waiting picks may go); one of picks' work only
// does not. A pick's KV blocks (PickAssigned.kv_blocks) add to the
// instance's projected KV use here, and a snapshot carries them to a late
// replica (InstanceSnapshot.assigned_kv_blocks).
func TestEventsForFlowControl(t *testing.T) {
	var freed []string
	r, err := New(newHost(t), Options{Cluster: cluster.Config{URLs: []string{"nats://127.0.0.1:1"}, Name: "r1"},
		Logger: quietLog(), Now: frozenNow, Freed: func(pool string) { freed = append(freed, pool) }})
	if err != nil {
		t.Fatal(err)
	}
	batch := func(evs ...*pb.ClusterEvent) {
		var payloads [][]byte
		for _, ev := range evs {
			data, err := proto.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			payloads = append(payloads, data)
		}
		r.onEvents("chat", "r2", frozen, payloads)
	}
	report := &pb.ClusterEvent{Event: &pb.ClusterEvent_Report{Report: &pb.ReportLoadRequest{
		Pool: "chat", Deployment: "a", InstanceId: "y", Address: "10.0.0.2:8000", Seq: 1,
		KvCacheUsage: 0.5, KvCapacityBlocks: 1000, BlockSizeTokens: 16}}}
	assigned := &pb.ClusterEvent{Event: &pb.ClusterEvent_Assigned{Assigned: &pb.PickAssigned{InstanceId: "y", PrefillTokens: 1600, KvBlocks: 100}}}
	batch(report, assigned)
	if !slices.Equal(freed, []string{"chat"}) {
		t.Fatalf("after a batch with a report: Freed called with %q, want [chat]", freed)
	}
	batch(assigned, assigned)
	if len(freed) != 1 {
		t.Errorf("a batch of picks' work only called Freed: %q", freed)
	}
	p, err := r.h.Registry().Pool("chat")
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Instances(frozen); len(st) != 1 || st[0].AssignedKVBlocks != 300 || st[0].AssignedTokens != 4800 {
		t.Fatalf("instance after three picks' events: %+v, want 300 KV blocks, 4800 tokens", st)
	}
	data, err := r.snapshot("chat")
	if err != nil {
		t.Fatal(err)
	}
	var snap pb.PoolSnapshots
	if err := proto.Unmarshal(data, &snap); err != nil {
		t.Fatal(err)
	}
	r2, err := New(newHost(t), Options{Cluster: cluster.Config{URLs: []string{"nats://127.0.0.1:1"}, Name: "r3"}, Logger: quietLog(), Now: frozenNow})
	if err != nil {
		t.Fatal(err)
	}
	lp, err := r2.h.Registry().Ensure("chat")
	if err != nil {
		t.Fatal(err)
	}
	for _, is := range snap.GetPools()[0].GetInstances() {
		if err := r2.importInstance(lp, frozen, is); err != nil {
			t.Fatal(err)
		}
	}
	if st := lp.Instances(frozen); len(st) != 1 || st[0].AssignedKVBlocks != 300 {
		t.Errorf("instance from the snapshot: %+v, want 300 KV blocks", st)
	}
}

// quietLog discards everything.
func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
