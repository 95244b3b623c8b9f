package client_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// TestBatchLinkReporters: four Reporters on one link report on one stream,
// several reports a message; the sidecar sees each instance with its own
// cache; closing them disconnects each.
func TestBatchLinkReporters(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	link, err := client.NewBatchLink(cc, client.BatchLinkOptions{AckInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	seed := prefixhash.Seed("m", "")
	var rs []*client.Reporter
	for i := range 4 {
		r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: fmt.Sprint("a-", i),
			CacheEvents: true, Interval: 20 * time.Millisecond, Link: link})
		r.Stored(prefixhash.Tokens(nil, seed, 16, iota32(1000*i, 16*(i+1)))...)
		rs = append(rs, r)
	}
	for i := range 4 {
		cachedBlocks(t, s, cc, "m", fmt.Sprint("a-", i), uint64(i+1))
	}
	testwait.EventuallyOK(t, func() string {
		if st := link.Stats(); st.Reports < 80 || st.Messages*2 > st.Reports || st.Streams != 1 {
			return fmt.Sprintf("link stats %+v: want one stream, 80 reports or more, at least 2 a message", st)
		}
		return ""
	})
	t.Logf("link: %+v", link.Stats())
	for _, r := range rs {
		if st := r.Stats(); !st.Connected || st.Acks == 0 || st.LastError != nil {
			t.Errorf("reporter stats %+v", st)
		}
		closeReporter(t, r)
	}
	for i := range 4 {
		testwait.EventuallyOK(t, func() string {
			if in := instanceStatus(cc, "m", fmt.Sprint("a-", i)); in.GetState() != pb.InstanceState_INSTANCE_STATE_DISCONNECTED {
				return fmt.Sprintf("a-%d is %v after Close, want disconnected", i, in.GetState())
			}
			return ""
		})
	}
}

// TestBatchLinkReconnects: after a sidecar restart every Reporter of the
// link reconnects on a new stream and resends its cache.
func TestBatchLinkReconnects(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	link, err := client.NewBatchLink(cc, client.BatchLinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seed := prefixhash.Seed("m", "")
	for i := range 3 {
		r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: fmt.Sprint("a-", i),
			CacheEvents: true, Interval: 20 * time.Millisecond, Link: link})
		r.Stored(prefixhash.Tokens(nil, seed, 16, iota32(1000*i, 16*2))...)
	}
	for i := range 3 {
		cachedBlocks(t, s, cc, "m", fmt.Sprint("a-", i), 2)
	}
	s = s.restart()
	for i := range 3 {
		cachedBlocks(t, s, cc, "m", fmt.Sprint("a-", i), 2)
	}
	if st := link.Stats(); st.Streams < 2 {
		t.Errorf("link stats %+v after a restart: want a second stream", st)
	}
}

// TestBatchLinkReplaced: a ReportLoad stream of one linked instance ends
// that instance alone (Aborted); the link's other Reporter goes on.
func TestBatchLinkReplaced(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	link, err := client.NewBatchLink(cc, client.BatchLinkOptions{AckInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(id string) client.ReporterOptions {
		return client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: id, Interval: 20 * time.Millisecond, Link: link,
			MinBackoff: time.Hour, MaxBackoff: time.Hour}
	}
	a := reporter(t, cc, opts("a"))
	b := reporter(t, cc, opts("b"))
	cachedBlocks(t, s, cc, "m", "a", 0)
	cachedBlocks(t, s, cc, "m", "b", 0)
	st, err := pb.NewLoadServiceClient(cc).ReportLoad(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&pb.ReportLoadRequest{Pool: "m", Deployment: "A", InstanceId: "a", Address: "other:8000", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	testwait.EventuallyOK(t, func() string {
		if c := status.Code(a.Stats().LastError); c != codes.Aborted {
			return fmt.Sprintf("linked reporter a: last error %v, want Aborted", a.Stats().LastError)
		}
		return ""
	})
	before := b.Stats().Acks
	testwait.EventuallyOK(t, func() string {
		if st := b.Stats(); st.Acks < before+3 || st.LastError != nil || !st.Connected {
			return fmt.Sprintf("reporter b after a was replaced: %+v", st)
		}
		return ""
	})
}

// TestBatchLinkReopen: a linked Reporter closed and another opened for the
// same instance (an agent switching to cache events) leave the instance
// connected, with the new Reporter's cache.
func TestBatchLinkReopen(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	link, err := client.NewBatchLink(cc, client.BatchLinkOptions{AckInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(id string, events bool) client.ReporterOptions {
		return client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: id, Interval: 20 * time.Millisecond, Link: link, CacheEvents: events}
	}
	reporter(t, cc, opts("b", false))
	a := reporter(t, cc, opts("a", false))
	cachedBlocks(t, s, cc, "m", "a", 0)
	closeReporter(t, a)
	a = reporter(t, cc, opts("a", true))
	a.Stored(prefixhash.Tokens(nil, prefixhash.Seed("m", ""), 16, iota32(0, 48))...)
	cachedBlocks(t, s, cc, "m", "a", 3)
	cachedBlocks(t, s, cc, "m", "b", 0)
}
