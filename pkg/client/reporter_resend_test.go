package client_test

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/testwait"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// resendSidecar is a LoadService that sets resend_cache once, in the ack
// of the first report by which it knows want blocks, as a router from
// before the resend catch-up was removed does when a replica joins; it
// records the reports.
type resendSidecar struct {
	pb.UnimplementedLoadServiceServer
	want    int
	mu      sync.Mutex
	known   map[uint64]bool
	asked   int // reports up to the one whose ack asked; 0: not asked yet
	reports []*pb.ReportLoadRequest
}

func (s *resendSidecar) ReportLoad(st grpc.BidiStreamingServer[pb.ReportLoadRequest, pb.ReportLoadResponse]) error {
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		s.mu.Lock()
		s.reports = append(s.reports, m)
		for _, h := range m.GetStoredBlockHashes() {
			s.known[h] = true
		}
		ask := s.asked == 0 && len(s.known) == s.want
		if ask {
			s.asked = len(s.reports)
		}
		s.mu.Unlock()
		//lint:ignore SA1019 the deprecated field is what this test is about
		if err := st.Send(&pb.ReportLoadResponse{Seq: m.GetSeq(), ReportIntervalMs: 10, ResendCache: ask}); err != nil {
			return err
		}
	}
}

// cleared returns the stored blocks of every report after the ask that
// carries cache_cleared.
func (s *resendSidecar) cleared() [][]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]uint64
	if s.asked == 0 {
		return nil
	}
	for _, r := range s.reports[s.asked:] {
		if r.GetCacheCleared() {
			out = append(out, slices.Sorted(slices.Values(r.GetStoredBlockHashes())))
		}
	}
	return out
}

// TestReporterResendCache: an ack with resend_cache makes the Reporter send
// its whole cache again (cache_cleared and every stored block) in its next
// report, once, and count it in Stats.Resends.
func TestReporterResendCache(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	sc := &resendSidecar{want: 3, known: map[uint64]bool{}}
	pb.RegisterLoadServiceServer(gs, sc)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc := dial(t, lis.Addr().String())
	r := reporter(t, cc, client.ReporterOptions{Pool: "chat", Deployment: "d", InstanceID: "i-0", CacheEvents: true,
		Interval: 10 * time.Millisecond})
	r.Stored(3, 1, 2)
	testwait.Eventually(t, "the resent cache", func() bool { return len(sc.cleared()) > 0 })
	if got := sc.cleared(); len(got) != 1 || !slices.Equal(got[0], []uint64{1, 2, 3}) {
		t.Fatalf("reports after the first with cache_cleared: %v, want one with [1 2 3]", got)
	}
	if st := r.Stats(); st.Resends != 1 {
		t.Errorf("Stats.Resends = %d, want 1", st.Resends)
	}
}
