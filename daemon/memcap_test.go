package daemon

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/state"
)

// cgroupDir writes files (path relative to the root -> content) into a
// fresh cgroup root.
func cgroupDir(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestMemoryLimitDerivation(t *testing.T) {
	const gib = 1 << 30
	none := int64(math.MaxInt64)
	for _, tc := range []struct {
		name      string
		files     map[string]string
		goMem     int64
		wantBytes int64
		wantSrc   string // "" none; "cgroup" a cgroup file; "GOMEMLIMIT"
		wantPairs int
	}{
		{"no files, no GOMEMLIMIT", nil, none, 0, "", state.DefaultMaxIndexPairs},
		{"v2 limit", map[string]string{"memory.max": "1073741824\n"}, none, gib, "cgroup", 3904515},
		{"v2 max", map[string]string{"memory.max": "max\n"}, none, 0, "", state.DefaultMaxIndexPairs},
		{"v2 max, GOMEMLIMIT", map[string]string{"memory.max": "max\n"}, gib / 2, gib / 2, "GOMEMLIMIT", 1952257},
		{"v1 limit", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, none, gib / 2, "cgroup", 1952257},
		{"v1 unlimited", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, none, 0, "", state.DefaultMaxIndexPairs},
		{"garbage", map[string]string{"memory.max": "lots\n"}, none, 0, "", state.DefaultMaxIndexPairs},
		{"GOMEMLIMIT smaller", map[string]string{"memory.max": "1073741824"}, gib / 4, gib / 4, "GOMEMLIMIT", 976128},
		{"GOMEMLIMIT larger", map[string]string{"memory.max": "1073741824"}, 2 * gib, gib, "cgroup", 3904515},
		{"tiny limit floors at 1024", map[string]string{"memory.max": "4096"}, none, 4096, "cgroup", 1024},
		{"huge limit caps at default", map[string]string{"memory.max": "1099511627776000"}, none, 1099511627776000, "cgroup", state.DefaultMaxIndexPairs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := cgroupDir(t, tc.files)
			l := memoryLimit(root, tc.goMem)
			if l.Bytes != tc.wantBytes {
				t.Errorf("limit %d bytes, want %d (%+v)", l.Bytes, tc.wantBytes, l)
			}
			switch {
			case tc.wantSrc == "cgroup" && (len(l.Source) < 7 || l.Source[:7] != "cgroup "):
				t.Errorf("source %q, want a cgroup file", l.Source)
			case tc.wantSrc != "cgroup" && l.Source != tc.wantSrc:
				t.Errorf("source %q, want %q", l.Source, tc.wantSrc)
			}
			if c := deriveIndexCap(l); c.Pairs != tc.wantPairs {
				t.Errorf("cap %d pairs, want %d", c.Pairs, tc.wantPairs)
			}
		})
	}
}

func TestIndexCapFlagWinsAndLogLine(t *testing.T) {
	root := cgroupDir(t, map[string]string{"memory.max": "1073741824"})
	cfg := Config{CgroupRoot: root}
	cfg.Server.Limits.MaxIndexPairs = 5000
	if c := applyIndexCap(&cfg); c.Pairs != 5000 || !c.Explicit || cfg.Server.Limits.MaxIndexPairs != 5000 {
		t.Fatalf("explicit cap: got %+v, limits %d", c, cfg.Server.Limits.MaxIndexPairs)
	}
	cfg.Server.Limits.MaxIndexPairs = 0
	c := applyIndexCap(&cfg)
	if cfg.Server.Limits.MaxIndexPairs != c.Pairs || c.Pairs > 3904515 {
		t.Fatalf("derived cap %+v, limits %d", c, cfg.Server.Limits.MaxIndexPairs)
	}
	want := "index cap 3,904,515 pairs (≈ 614 MiB of a 1024 MiB limit, cgroup " + filepath.Join(root, "memory.max") + ")"
	if got := deriveIndexCap(memoryLimit(root, math.MaxInt64)).String(); got != want {
		t.Errorf("log line\n got %s\nwant %s", got, want)
	}
}

// TestIndexMemoryAllocsUnderLimit starts a daemon under a 48 MiB cgroup limit
// (derived cap 183,000 pairs) and feeds it 400,000 unique blocks from four
// instances: the index stays at the cap, the eviction counter grows, Picks
// are answered, and the live heap grows by less than the limit (checked in make
// test's non-race pass of 'Alloc' tests: the race runtime inflates the heap).
func TestIndexMemoryAllocsUnderLimit(t *testing.T) {
	const limit = 48 << 20
	root := cgroupDir(t, map[string]string{"memory.max": "50331648"})
	// The heap the rest of the test binary holds (other tests' leftovers)
	// is not the daemon's: measure the growth from here.
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	d := obsStart(t, func(c *Config) { c.CgroupRoot = root })
	capPairs := d.Server().Limits().MaxIndexPairs
	lim := float64(limit)
	if want := int(lim * IndexMemoryFraction / IndexBytesPerPair); capPairs != want {
		t.Fatalf("derived cap %d pairs, want %d", capPairs, want)
	}
	pick, load, _ := obsClients(t, d)
	const instances, perInstance, perReport = 4, 100000, 50000
	next := uint64(1)
	for i := range instances {
		s := obsConnect(t, load)
		id := string(rune('a' + i))
		s.report(&pb.ReportLoadRequest{Pool: "big", Deployment: "d", InstanceId: id, Address: "10.0.0." + string(rune('1'+i)) + ":8000",
			ReportsCacheEvents: true, KvCapacityBlocks: perInstance})
		for range perInstance / perReport {
			h := make([]uint64, perReport)
			for j := range h {
				h[j], next = next, next+1
			}
			s.report(&pb.ReportLoadRequest{StoredBlockHashes: h, KvCapacityBlocks: perInstance})
		}
	}
	held, evicted := d.Server().Registry().IndexPairs()
	if held > int64(capPairs) || evicted < instances*perInstance-int64(capPairs) {
		t.Errorf("index holds %d pairs (cap %d), evicted %d; want at most the cap and at least %d evicted",
			held, capPairs, evicted, instances*perInstance-capPairs)
	}
	fams := obsScrape(t, d)
	v, ok := obsValueOK(fams, "prefixroute_prefix_index_cap_evicted_total", nil)
	if !ok {
		v = obsValue(t, fams, "prefixroute_prefix_index_cap_evicted", nil)
	}
	if v < float64(evicted) {
		t.Errorf("eviction metric %g, want %d", v, evicted)
	}
	resp, err := pick.Pick(context.Background(), &pb.PickRequest{Pool: "big", PrefixHashes: []uint64{next - 1, next - 2}, PromptTokens: 64})
	if err != nil || resp.GetInstanceId() == "" {
		t.Fatalf("Pick after eviction: %q, %v; want an instance", resp.GetInstanceId(), err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapAlloc) - int64(before.HeapAlloc)
	if !raceEnabled && grown > limit {
		t.Errorf("live heap grew %d MiB after GC, over the %d MiB limit", grown>>20, limit>>20)
	}
	t.Logf("cap %d pairs, held %d, evicted %d, live heap grew %.1f MiB of %d MiB (%.1f MiB in all)", capPairs, held, evicted, float64(grown)/(1<<20), limit>>20, float64(ms.HeapAlloc)/(1<<20))
}
