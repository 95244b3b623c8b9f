package daemon

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// diskFault makes the data dir refuse writes; undo lets them through again.
type diskFault struct {
	name     string
	setup    func(t *testing.T) (dir string)              // the data dir to use
	breakDir func(t *testing.T, dir string) (undo func()) // after the first change
}

// diskFaults are the ways the tests make a data dir fail. As root, chmod
// does not stop writes, so each fault works for root:
//   - "full": the data dir is a 1 MiB tmpfs mount, filled with a file
//     (ENOSPC: the real thing; skipped where mount is not permitted);
//   - "tmp path blocked": state.json.tmp is a non-empty directory, so the
//     atomic write cannot create its temporary file (EISDIR);
//   - "read-only": chmod 0500 of the data dir, for non-root runs only.
var diskFaults = []diskFault{{
	name: "full",
	setup: func(t *testing.T) string {
		dir := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs here (%v: %s); the other data-dir faults still run", err, bytes.TrimSpace(out))
		}
		t.Cleanup(func() {
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v: %s", dir, err, bytes.TrimSpace(out))
			}
		})
		return dir
	},
	breakDir: func(t *testing.T, dir string) func() {
		fill := filepath.Join(dir, "fill")
		f, err := os.Create(fill)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 64<<10)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the tmpfs: %v", err)
				}
				break
			}
		}
		// A full disk fails the close too (what was buffered has nowhere
		// to go); the file is removed next anyway.
		_ = f.Close()
		return func() { must(t, os.Remove(fill)) }
	},
}, {
	name:  "tmp path blocked",
	setup: func(t *testing.T) string { return t.TempDir() },
	breakDir: func(t *testing.T, dir string) func() {
		must(t, os.MkdirAll(filepath.Join(dir, "state.json.tmp", "blocker"), 0o700))
		return func() { must(t, os.RemoveAll(filepath.Join(dir, "state.json.tmp"))) }
	},
}, {
	name: "read-only",
	setup: func(t *testing.T) string {
		if os.Geteuid() == 0 {
			t.Skip("root writes through chmod; the other faults cover root")
		}
		return t.TempDir()
	},
	breakDir: func(t *testing.T, dir string) func() {
		must(t, os.Chmod(dir, 0o500))
		return func() { must(t, os.Chmod(dir, 0o700)) }
	},
}}

// TestSetWeightsOnBrokenDataDir: while the data dir refuses writes,
// SetWeights and SetPolicy fail with Unavailable and change nothing: not
// memory, not the state file, not the audit log, and a restart finds the
// old weights. Once writes work again, the next change succeeds at the
// next version.
func TestSetWeightsOnBrokenDataDir(t *testing.T) {
	for _, f := range diskFaults {
		t.Run(f.name, func(t *testing.T) {
			dir := f.setup(t)
			cfg := func(c *Config) { c.Server.DataDir = dir }
			d := obsStart(t, cfg)
			_, _, admin := obsClients(t, d)
			old := map[string]float64{"a": 9, "b": 1}
			if _, err := admin.SetWeights(ctxT(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: old}); err != nil {
				t.Fatal(err)
			}
			stateFile, audit := filepath.Join(dir, "state.json"), filepath.Join(dir, "audit.log")
			before, _ := os.ReadFile(stateFile)
			auditBefore, _ := os.ReadFile(audit)

			undo := f.breakDir(t, dir)
			_, err := admin.SetWeights(ctxT(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"a": 1, "b": 9}})
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "cannot persist") {
				t.Fatalf("SetWeights on a broken data dir: %v, want Unavailable", err)
			}
			_, err = admin.SetPolicy(ctxT(t), &pb.SetPolicyRequest{AllowNewPool: true, Pool: "chat", Policy: &pb.Policy{DeltaMs: f64p(5)}})
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("SetPolicy on a broken data dir: %v, want Unavailable", err)
			}
			w, err := admin.GetWeights(ctxT(t), &pb.GetWeightsRequest{Pool: "chat"})
			if err != nil || w.GetVersion() != 1 || !maps.Equal(w.GetWeights(), old) {
				t.Fatalf("in memory after the failure: %v %v", w, err)
			}
			if after, _ := os.ReadFile(stateFile); !bytes.Equal(after, before) {
				t.Errorf("state file changed:\n%s\nwas\n%s", after, before)
			}
			if after, _ := os.ReadFile(audit); !bytes.Equal(after, auditBefore) {
				t.Errorf("audit log changed: %s", after)
			}

			// Restart once writes work again: the weights on disk are the old ones.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			must(t, d.Shutdown(ctx))
			undo()
			d2 := obsStart(t, cfg)
			_, _, admin2 := obsClients(t, d2)
			if w, err := admin2.GetWeights(ctxT(t), &pb.GetWeightsRequest{Pool: "chat"}); err != nil || w.GetVersion() != 1 || !maps.Equal(w.GetWeights(), old) {
				t.Fatalf("after a restart: %v %v", w, err)
			}
			if r, err := admin2.SetWeights(ctxT(t), &pb.SetWeightsRequest{AllowNewPool: true, Pool: "chat", Weights: map[string]float64{"b": 1}, ExpectedVersion: 1}); err != nil || r.GetVersion() != 2 {
				t.Fatalf("once writes work again: %v %v", r, err)
			}
		})
	}
}

func f64p(v float64) *float64 { return &v }
