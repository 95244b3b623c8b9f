package sim

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"
)

// TraceRecord is one line of a JSONL trace: one request. Times are in ms
// from the start of the trace, lines in time order. The prompt's blocks are
// given one of two ways:
//
//   - hashes: the chained block hashes a gateway sends (prefixhash token
//     mode with the scenario's block size), and optionally decode_hashes,
//     the blocks the answer completes. prefixsim trace writes these.
//   - hash_ids: one id per block, equal ids meaning equal prefixes up to
//     that block, as in the Mooncake traces; the simulator chains them
//     into hashes. The scenario's block_tokens must be the trace's block
//     size (512 for Mooncake). Only the prompt's full blocks are kept
//     (prompt tokens / block_tokens of them): the last id of a Mooncake
//     line names a partial block, which a gateway does not hash and an
//     engine does not cache (and Pick refuses more blocks than the prompt
//     fills).
//
// The Mooncake field names timestamp, input_length and output_length are
// accepted for t_ms, prompt_tokens and output_tokens.
type TraceRecord struct {
	TMs          float64  `json:"t_ms"`
	PromptTokens uint32   `json:"prompt_tokens"`
	OutputTokens uint32   `json:"output_tokens,omitempty"`
	Class        int      `json:"class,omitempty"`
	Hashes       []uint64 `json:"hashes,omitempty"`
	DecodeHashes []uint64 `json:"decode_hashes,omitempty"`
	HashIDs      []uint64 `json:"hash_ids,omitempty"`

	Timestamp    *float64 `json:"timestamp,omitempty"`
	InputLength  uint32   `json:"input_length,omitempty"`
	OutputLength uint32   `json:"output_length,omitempty"`
}

// WriteTrace writes every request of wl to w as JSONL (hashes form) and
// returns how many it wrote.
func WriteTrace(w io.Writer, wl Workload) (int, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	n := 0
	for {
		r, err := wl.Next()
		if err != nil || r == nil {
			if ferr := bw.Flush(); err == nil {
				err = ferr
			}
			return n, err
		}
		rec := TraceRecord{TMs: float64(r.Arrival) / 1e6, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens,
			Class: r.Class, Hashes: r.Hashes, DecodeHashes: r.DecodeHashes}
		if err := enc.Encode(&rec); err != nil {
			return n, err
		}
		n++
	}
}

// traceWorkload replays a JSONL trace. It reads the trace one group of
// lines sharing a time at a time, spreads each group over
// WorkloadSpec.TraceSpread, and yields the pending requests in arrival order
// (ties in line order) once no later group can arrive before them.
type traceWorkload struct {
	f        io.Closer
	sc       *bufio.Scanner
	line     int
	end      time.Duration
	next     uint64
	poolSeed uint64
	speed    float64 // WorkloadSpec.TraceSpeed
	spreadMs float64 // WorkloadSpec.TraceSpread, ms of the trace's time
	block    uint32  // Scenario.BlockTokens

	peeked  *traceLine // the first line of the next group; nil at the end or on err
	err     error      // reading the line after the pending ones failed
	started bool       // the first line has been read into peeked
	lastMs  float64    // the time of the last line read
	pending pendingHeap
	seq     uint64 // line order of the pending requests
}

// traceLine is one parsed line of a trace, at ms of the trace's time.
type traceLine struct {
	ms float64
	r  *Request // without its ID and Arrival
}

// pendingReq is a request read and spread, not yet yielded.
type pendingReq struct {
	at  time.Duration
	seq uint64
	r   *Request
}

// pendingHeap is a min-heap of pendingReq by (at, seq).
type pendingHeap []pendingReq

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(pendingReq)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// openTrace opens sc's trace file (relative to the scenario file).
func openTrace(sc *Scenario) (*traceWorkload, error) {
	path := sc.Workload.Trace
	if !filepath.IsAbs(path) && sc.dir != "" {
		path = filepath.Join(sc.dir, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return newTraceWorkload(f, sc), nil
}

func newTraceWorkload(r io.Reader, sc *Scenario) *traceWorkload {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<16), 64<<20)
	t := &traceWorkload{sc: s, end: sc.Duration.D(), poolSeed: poolSeed(sc.Pool), speed: 1, block: uint32(max(sc.BlockTokens, 1)),
		spreadMs: float64(sc.Workload.TraceSpread.D()) / 1e6}
	if v := sc.Workload.TraceSpeed; v > 0 {
		t.speed = v
	}
	if c, ok := r.(io.Closer); ok {
		t.f = c
	}
	return t
}

// arrival is the replay's time of ms of the trace's time.
func (t *traceWorkload) arrival(ms float64) time.Duration {
	return time.Duration(math.Round(ms / t.speed * 1e6))
}

func (t *traceWorkload) Next() (*Request, error) {
	if !t.started {
		t.started = true
		t.err = t.peek()
	}
	for {
		// Every line not yet read arrives at or after the next group's time.
		// A line that failed to read is reported after the lines before it.
		if len(t.pending) > 0 && (t.peeked == nil || t.pending[0].at <= t.arrival(t.peeked.ms)) {
			p := heap.Pop(&t.pending).(pendingReq)
			if p.at >= t.end {
				return nil, nil
			}
			p.r.ID, p.r.Arrival = t.next, p.at
			t.next++
			return p.r, nil
		}
		if t.err != nil {
			return nil, t.err
		}
		if t.peeked == nil || t.arrival(t.peeked.ms) >= t.end {
			return nil, nil
		}
		// Read the next group: the lines sharing the peeked line's time.
		group := []*Request{t.peeked.r}
		ms := t.peeked.ms
		for {
			if t.err = t.peek(); t.peeked == nil || t.peeked.ms != ms {
				break
			}
			group = append(group, t.peeked.r)
		}
		n := float64(len(group))
		for k, r := range group {
			heap.Push(&t.pending, pendingReq{at: t.arrival(ms + t.spreadMs*float64(k)/n), seq: t.seq, r: r})
			t.seq++
		}
	}
}

// peek reads the trace's next line into t.peeked (nil at its end).
func (t *traceWorkload) peek() error {
	t.peeked = nil
	for t.sc.Scan() {
		t.line++
		b := t.sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec TraceRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("trace line %d: %w", t.line, err)
		}
		ms := rec.TMs
		if rec.Timestamp != nil {
			ms = *rec.Timestamp
		}
		if math.IsNaN(ms) || ms < 0 || math.IsInf(ms, 0) {
			return fmt.Errorf("trace line %d: time %v ms: want a finite number >= 0", t.line, ms)
		}
		if ms < t.lastMs {
			return fmt.Errorf("trace line %d: time %v ms is before the previous line's", t.line, ms)
		}
		t.lastMs = ms
		r := &Request{Class: rec.Class, PromptTokens: max(rec.PromptTokens, rec.InputLength),
			OutputTokens: max(rec.OutputTokens, rec.OutputLength), Hashes: rec.Hashes, DecodeHashes: rec.DecodeHashes}
		if len(r.Hashes) == 0 && len(rec.HashIDs) > 0 {
			ids := rec.HashIDs[:min(len(rec.HashIDs), int(r.PromptTokens/t.block))]
			r.Hashes = make([]uint64, len(ids))
			h := t.poolSeed
			for i, id := range ids {
				h = splitmix(h ^ splitmix(id))
				r.Hashes[i] = h
			}
		}
		t.peeked = &traceLine{ms: ms, r: r}
		return nil
	}
	if err := t.sc.Err(); err != nil {
		return fmt.Errorf("trace line %d: %w", t.line+1, err)
	}
	return nil
}

// Close closes the trace file.
func (t *traceWorkload) Close() error {
	if t.f != nil {
		return t.f.Close()
	}
	return nil
}

// NewWorkload returns the scenario's workload: its trace, or its synthetic
// classes seeded with seed. Close it when it is an io.Closer.
func NewWorkload(sc *Scenario, seed uint64) (Workload, error) {
	if sc.Workload.Trace != "" {
		return openTrace(sc)
	}
	return newSynthetic(sc, seed), nil
}
