package server

import (
	"fmt"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// TestPickBookBounded: the book keeps the last pickBookShard picks of a
// shard; an evicted id no longer matches, a kept one does, and a retried
// id replaces its pick in place.
func TestPickBookBounded(t *testing.T) {
	b := newPickBook()
	ids := make([]string, 3*pickBookSize)
	for i := range ids {
		ids[i] = fmt.Sprintf("r-%d", i)
		b.add(&PickOutcome{Pool: "m", RequestID: ids[i], Instance: "a"})
	}
	n := 0
	for i := range b.shards {
		if l := len(b.shards[i].byID); l != pickBookShard {
			t.Errorf("shard %d holds %d ids, want %d", i, l, pickBookShard)
		}
		n += len(b.shards[i].byID)
	}
	if n != pickBookSize {
		t.Errorf("book holds %d picks, want %d", n, pickBookSize)
	}
	if b.match("m", ids[0], "a", pb.OutcomeStatus_OUTCOME_STATUS_SERVED, nil, new(PickOutcome)) {
		t.Error("the first pick, long evicted, matched")
	}
	last := ids[len(ids)-1]
	if !b.match("m", last, "a", pb.OutcomeStatus_OUTCOME_STATUS_SERVED, nil, new(PickOutcome)) || b.match("other", last, "a", pb.OutcomeStatus_OUTCOME_STATUS_SERVED, nil, new(PickOutcome)) {
		t.Error("the last pick did not match in its pool, or matched in another")
	}
	b.add(&PickOutcome{Pool: "m", RequestID: last, Instance: "b"})
	if po, ok := b.get(last); !ok || po.Instance != "b" || po.Reported {
		t.Errorf("retried pick = %+v, %v; want the new pick on b, not reported", po, ok)
	}
}

// BenchmarkPickBookAdd is what a Pick with a request_id pays to be kept
// for its outcome: one shard lock, a map delete and insert, no allocation
// once the book is full.
func BenchmarkPickBookAdd(b *testing.B) {
	book := newPickBook()
	ids := make([]string, 4*pickBookSize)
	for i := range ids {
		ids[i] = fmt.Sprintf("req-%d", i)
	}
	e := PickOutcome{Pool: "m", Instance: "a", Deployment: "d"}
	for _, id := range ids[:2*pickBookSize] { // fill: the steady state evicts
		e.RequestID = id
		book.add(&e)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.RequestID = ids[i%len(ids)]
		book.add(&e)
		i++
	}
}
