package readiness_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
	"github.com/prefixroute/prefixroute/scheduler"
)

// bytesIn reads fuzz input; past its end every read is 0.
type bytesIn struct{ b []byte }

func (r *bytesIn) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *bytesIn) u64() uint64 {
	var buf [8]byte
	for i := range buf {
		buf[i] = r.u8()
	}
	return binary.LittleEndian.Uint64(buf[:])
}

// small returns an int in [-2, 13], often out of range on purpose.
func (r *bytesIn) small() int { return int(r.u8()%16) - 2 }

var fuzzNames = []string{"A", "B", "C", "D", ""}

// FuzzRecord records arbitrary snapshots and decisions (out-of-range
// indexes, duplicate names, huge or negative matched blocks, NaN and
// infinite PrefillMs, times jumping back and forth) into a small tracker
// (3 buckets, 2 deployments, 2 hot entries of 3 blocks), then checks Status
// never panics, never reports NaN or an infinity, and fails only with a
// sentinel.
func FuzzRecord(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{2, 3, 0, 1, 2, 5, 1, 0, 7, 200, 9, 9, 9, 9, 9, 9, 9, 9, 3, 4, 5})
	f.Add([]byte("\x03\x04\x01\x02\x03\x00\x01\x02\x05\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x10\x80"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &bytesIn{data}
		tr := readiness.New(readiness.Config{Window: 3 * time.Second, Buckets: 3, MaxDeployments: 2,
			HotPrefixes: 2, MaxHotBlocks: 3, SketchPrecision: 4})
		now := t0
		for range int(in.u8()%8) + 1 {
			snap := &scheduler.Snapshot{}
			for range int(in.u8() % 5) {
				snap.Deployments = append(snap.Deployments, scheduler.Deployment{Name: fuzzNames[in.u8()%5]})
			}
			d := &scheduler.Decision{Deployment: in.small(), Instance: in.small()}
			d.Deployments = make([]scheduler.DeploymentResult, int(in.u8()%6))
			for k := range d.Deployments {
				d.Deployments[k].MatchedBlocks = int(int8(in.u8())) * int(in.u8())
			}
			ni := int(in.u8() % 5)
			d.Instances = make([]scheduler.InstanceResult, ni)
			for i := range ni {
				snap.Instances = append(snap.Instances, scheduler.Instance{Deployment: in.small(),
					MatchedBlocks: int(int8(in.u8())), BlockSizeTokens: uint32(in.u8()) << (in.u8() % 32)})
				d.Instances[i].UncachedTokens = uint32(in.u64())
				d.Instances[i].PrefillMs = math.Float64frombits(in.u64())
			}
			hs := make([]uint64, int(in.u8()%6))
			for k := range hs {
				hs[k] = uint64(in.u8() % 4) // few values: shared first blocks, evictions
			}
			now = now.Add(time.Duration(int8(in.u8())) * 100 * time.Millisecond)
			if in.u8()%16 == 0 {
				now = time.Unix(int64(in.u64()), 0) // anywhere, far past and future included
			}
			tr.Record(now, hs, uint32(in.u64()), snap, d)
		}
		live := &fakeLive{deps: []readiness.LiveDeployment{
			{Name: "A", Weight: math.Float64frombits(in.u64()), Instances: in.small(), PrefillTokensPerSecond: math.Float64frombits(in.u64())},
			{Name: "B", Weight: float64(in.u8()), Instances: in.small(), PrefillTokensPerSecond: float64(in.u8())},
		}}
		live.cache("A", []uint64{0, 1, 2, 3})
		q := readiness.Query{From: fuzzNames[in.u8()%5], To: fuzzNames[in.u8()%5], TopK: in.small()}
		st, err := tr.Status(now.Add(time.Duration(int8(in.u8()))*100*time.Millisecond), q, live)
		if err != nil {
			if !errors.Is(err, readiness.ErrInvalidQuery) && !errors.Is(err, readiness.ErrSameDeployment) &&
				!errors.Is(err, readiness.ErrUnknownDeployment) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		checkFinite(t, st)
		if st.Covered < 0 || st.Covered >= st.Window || len(st.HotPrefixes) > max(q.TopK, 10) {
			t.Fatalf("covered %v of %v, %d hot", st.Covered, st.Window, len(st.HotPrefixes))
		}
	})
}
