package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestTraceRoundTrip: a synthetic workload written as a trace and replayed
// gives exactly the same run.
func TestTraceRoundTrip(t *testing.T) {
	sc := parse(t, tinyYAML)
	wl, err := NewWorkload(sc, sc.Seed)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := WriteTrace(&buf, wl)
	if err != nil || n < 1000 {
		t.Fatalf("WriteTrace: %d requests, %v", n, err)
	}
	path := filepath.Join(t.TempDir(), "tiny.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	replay := *sc
	replay.Workload = WorkloadSpec{Trace: path}
	if err := replay.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"softmax", "threshold-noev"} {
		a, b := run(t, sc, v, RunOptions{}), run(t, &replay, v, RunOptions{})
		if !reflect.DeepEqual(a.Records, b.Records) || len(a.Records) != n {
			t.Fatalf("%s: replayed trace differs from the synthetic run (%d vs %d records)", v, len(a.Records), len(b.Records))
		}
	}
}

func TestTraceMooncakeFormat(t *testing.T) {
	sc := parse(t, tinyYAML)
	lines := `{"timestamp": 1500, "input_length": 1024, "output_length": 20, "hash_ids": [1, 2, 3]}

{"timestamp": 2500.5, "input_length": 700, "output_length": 5, "hash_ids": [1, 2, 4]}
{"t_ms": 3000, "prompt_tokens": 50}
{"timestamp": 3500, "input_length": 40, "hash_ids": [1, 2, 5]}
`
	wl := newTraceWorkload(strings.NewReader(lines), sc)
	var got []*Request
	for {
		r, err := wl.Next()
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			break
		}
		got = append(got, r)
	}
	if len(got) != 4 {
		t.Fatalf("%d requests, want 4", len(got))
	}
	a, b := got[0], got[1]
	if a.Arrival != 1500*time.Millisecond || b.Arrival != 2500500*time.Microsecond || a.PromptTokens != 1024 || a.OutputTokens != 20 {
		t.Fatalf("first two: %+v %+v", a, b)
	}
	if len(a.Hashes) != 3 || a.Hashes[0] != b.Hashes[0] || a.Hashes[1] != b.Hashes[1] || a.Hashes[2] == b.Hashes[2] {
		t.Fatalf("hash_ids not chained into shared prefixes: %x %x", a.Hashes, b.Hashes)
	}
	if len(got[2].Hashes) != 0 || got[2].PromptTokens != 50 {
		t.Fatalf("third: %+v", got[2])
	}
	// 40 tokens fill 2 blocks of 16: the third id, a partial block, is dropped.
	if d := got[3]; len(d.Hashes) != 2 || d.Hashes[0] != a.Hashes[0] || d.Hashes[1] != a.Hashes[1] {
		t.Fatalf("fourth: %d hashes %x, want the first two of %x", len(d.Hashes), d.Hashes, a.Hashes)
	}
	for _, bad := range []string{`{"t_ms": 5}` + "\n" + `{"t_ms": 4}`, `{"t_ms": "x"}`, `{"t_ms": -1}`} {
		wl := newTraceWorkload(strings.NewReader(bad), sc)
		var err error
		for err == nil {
			var r *Request
			if r, err = wl.Next(); r == nil && err == nil {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "trace line") {
			t.Errorf("%q: error %v, want one naming the line", bad, err)
		}
	}
}
