package pickbook

import (
	"fmt"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// TestBookBounded: the book keeps the last ShardSize picks of a
// shard; an evicted id no longer matches, a kept one does, and a retried
// id replaces its pick in place.
func TestBookBounded(t *testing.T) {
	b := New()
	ids := make([]string, 3*Size)
	for i := range ids {
		ids[i] = fmt.Sprintf("r-%d", i)
		b.Add(&Entry{Pool: "m", RequestID: ids[i], Instance: "a"})
	}
	n := 0
	for i := range b.shards {
		if l := len(b.shards[i].byID); l != ShardSize {
			t.Errorf("shard %d holds %d ids, want %d", i, l, ShardSize)
		}
		n += len(b.shards[i].byID)
	}
	if n != Size {
		t.Errorf("book holds %d picks, want %d", n, Size)
	}
	if b.Match("m", ids[0], "a", pb.OutcomeStatus_OUTCOME_STATUS_SERVED, nil, new(Entry)) {
		t.Error("the first pick, long evicted, matched")
	}
	last := ids[len(ids)-1]
	if !b.Match("m", last, "a", pb.OutcomeStatus_OUTCOME_STATUS_SERVED, nil, new(Entry)) || b.Match("other", last, "a", pb.OutcomeStatus_OUTCOME_STATUS_SERVED, nil, new(Entry)) {
		t.Error("the last pick did not match in its pool, or matched in another")
	}
	b.Add(&Entry{Pool: "m", RequestID: last, Instance: "b"})
	if po, ok := b.Get(last); !ok || po.Instance != "b" || po.Reported {
		t.Errorf("retried pick = %+v, %v; want the new pick on b, not reported", po, ok)
	}
}

// BenchmarkBookAdd is what a Pick with a request_id pays to be kept
// for its outcome: one shard lock, a map delete and insert, no allocation
// once the book is full.
func BenchmarkBookAdd(b *testing.B) {
	book := New()
	ids := make([]string, 4*Size)
	for i := range ids {
		ids[i] = fmt.Sprintf("req-%d", i)
	}
	e := Entry{Pool: "m", Instance: "a", Deployment: "d"}
	for _, id := range ids[:2*Size] { // fill: the steady state evicts
		e.RequestID = id
		book.Add(&e)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.RequestID = ids[i%len(ids)]
		book.Add(&e)
		i++
	}
}
