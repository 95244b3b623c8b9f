package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

func newPicker(t *testing.T, cc grpc.ClientConnInterface, opts client.PickerOptions) *client.Picker {
	t.Helper()
	p, err := client.NewPicker(cc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPickerHashes: the Picker's hashes are prefixhash's, for every mode,
// block size and salt, and the prompt length defaults follow the mode.
func TestPickerHashes(t *testing.T) {
	tokens := iota32(7, 100)
	text := "You are a helpful assistant. 你好，世界! " + string(make([]byte, 200))
	pre := []uint64{5, 6, 7}
	for _, tc := range []struct {
		name       string
		opts       client.PickerOptions
		req        client.Request
		want       []uint64
		wantPrompt uint32
	}{
		{"tokens, defaults", client.PickerOptions{Pool: "m"}, client.Request{Tokens: tokens},
			prefixhash.Tokens(nil, prefixhash.Seed("m", ""), 16, tokens), 100},
		{"tokens, block 32, salt", client.PickerOptions{Pool: "m", Salt: "t1", BlockSize: 32}, client.Request{Tokens: tokens},
			prefixhash.Tokens(nil, prefixhash.Seed("m", "t1"), 32, tokens), 100},
		{"tokens, prompt length given", client.PickerOptions{Pool: "m"}, client.Request{Tokens: tokens, PromptTokens: 900},
			prefixhash.Tokens(nil, prefixhash.Seed("m", ""), 16, tokens), 900},
		{"text, defaults", client.PickerOptions{Pool: "m"}, client.Request{Text: text},
			prefixhash.Text(nil, prefixhash.Seed("m", ""), 64, text), uint32(len(text) * 16 / 64)},
		{"text, chunk 10", client.PickerOptions{Pool: "other", TextChunkBytes: 10}, client.Request{Text: text},
			prefixhash.Text(nil, prefixhash.Seed("other", ""), 10, text), uint32(len(text) * 16 / 10)},
		{"hashes win over tokens", client.PickerOptions{Pool: "m"}, client.Request{Hashes: pre, Tokens: tokens},
			pre, 3 * 16},
		{"tokens win over text", client.PickerOptions{Pool: "m"}, client.Request{Tokens: tokens, Text: text},
			prefixhash.Tokens(nil, prefixhash.Seed("m", ""), 16, tokens), 100},
		{"nothing", client.PickerOptions{Pool: "m"}, client.Request{}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPicker(t, nil, tc.opts)
			if got := p.Hashes(nil, &tc.req); !slices.Equal(got, tc.want) {
				t.Errorf("Hashes = %x, want %x", got, tc.want)
			}
			// Through a real sidecar: the decision counts the same blocks and
			// prompt length.
			s := startSidecar(t, "127.0.0.1:0", "")
			cc := dial(t, s.addr)
			reporter(t, cc, client.ReporterOptions{Pool: tc.opts.Pool, Deployment: "A", InstanceID: "a-1"})
			cachedBlocks(t, s, cc, tc.opts.Pool, "a-1", 0)
			tc.opts.Timeout = 5 * time.Second
			res, err := newPicker(t, cc, tc.opts).Pick(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			dec := res.Response.GetDecision()
			if int(dec.GetBlocks()) != len(tc.want) || dec.GetPromptTokens() != tc.wantPrompt {
				t.Errorf("decision has %d blocks, %d prompt tokens; want %d and %d",
					dec.GetBlocks(), dec.GetPromptTokens(), len(tc.want), tc.wantPrompt)
			}
		})
	}
}

// TestPickMatchesInstanceCache: an instance that stores the prefixhash
// hashes of a prompt matches every block of a Pick of that prompt's tokens,
// and half of them for a prompt that shares only the first half.
func TestPickMatchesInstanceCache(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	prompt := iota32(1, 16*8)
	r := reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: "a-1", CacheEvents: true})
	r.Stored(prefixhash.Tokens(nil, prefixhash.Seed("m", ""), 16, prompt)...)
	cachedBlocks(t, s, cc, "m", "a-1", 8)
	p := newPicker(t, cc, client.PickerOptions{Pool: "m", Timeout: 5 * time.Second})
	other := slices.Concat(prompt[:64], iota32(5000, 64))
	for _, tc := range []struct {
		tokens []uint32
		want   uint32
	}{{prompt, 8}, {other, 4}, {iota32(9000, 64), 0}} {
		res, err := p.Pick(context.Background(), client.Request{Tokens: tc.tokens, Seed: u64(3)})
		if err != nil {
			t.Fatal(err)
		}
		in := res.Response.GetDecision().GetInstances()[0]
		if in.GetMatchedBlocks() != tc.want || res.Address != "a-1:8000" || res.Deployment != "A" {
			t.Errorf("matched %d blocks at %s (%s), want %d at a-1:8000 (A)", in.GetMatchedBlocks(), res.Address, res.Deployment, tc.want)
		}
	}
}

// TestPickFallback: with the sidecar down, Pick either fails with an
// unreachable error or chooses from the static list, saying so.
func TestPickFallback(t *testing.T) {
	static := []client.Endpoint{
		{InstanceID: "s-1", Address: "10.0.0.1:8000", Deployment: "A"},
		{InstanceID: "s-2", Address: "10.0.0.2:8000", Deployment: "A"},
		{InstanceID: "s-3", Address: "10.0.0.3:8000", Deployment: "B"},
	}
	tokens := iota32(1, 64)
	dead := servertest.DeadAddr(t)
	plain, err := grpc.NewClient(dead, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	// The fallback choice of a prompt is the same across Pickers and list
	// orders.
	first := newPicker(t, dial(t, dead), client.PickerOptions{Pool: "m", Fallback: static})
	want, err := first.Pick(context.Background(), client.Request{Tokens: tokens})
	if err != nil || !want.Fallback || !client.Unreachable(want.Cause) || want.Response != nil {
		t.Fatalf("fallback pick: %+v, %v", want, err)
	}
	for _, tc := range []struct {
		name      string
		cc        grpc.ClientConnInterface
		fallback  []client.Endpoint
		req       client.Request
		wantErr   bool
		wantAddr  string // "" = the same choice as first
		wantNotIn []string
	}{
		{"reversed list", dial(t, dead), reversed(static), client.Request{Tokens: tokens}, false, "", nil},
		{"conn not from Dial", plain, static, client.Request{Tokens: tokens}, false, "", nil},
		{"longer prompt, same first block", dial(t, dead), static, client.Request{Tokens: iota32(1, 160)}, false, "", nil},
		{"excluded choice", dial(t, dead), static, client.Request{Tokens: tokens, Exclude: []string{want.InstanceID}},
			false, "-", []string{want.Address}},
		{"everything excluded", dial(t, dead), static, client.Request{Tokens: tokens, Exclude: []string{"s-1", "10.0.0.2:8000", "s-3"}},
			true, "", nil},
		{"no fallback list", dial(t, dead), nil, client.Request{Tokens: tokens}, true, "", nil},
		{"short prompt: any", dial(t, dead), static[:1], client.Request{Tokens: iota32(1, 5)}, false, "10.0.0.1:8000", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPicker(t, tc.cc, client.PickerOptions{Pool: "m", Fallback: tc.fallback})
			res, err := p.Pick(context.Background(), tc.req)
			if tc.wantErr {
				if err == nil || !client.Unreachable(err) || status.Code(err) != codes.Unavailable {
					t.Fatalf("got %+v, %v; want an unreachable Unavailable error", res, err)
				}
				return
			}
			if err != nil || !res.Fallback || !client.Unreachable(res.Cause) {
				t.Fatalf("got %+v, %v; want a fallback", res, err)
			}
			switch {
			case tc.wantAddr == "" && (res.Address != want.Address || res.InstanceID != want.InstanceID || res.Deployment != want.Deployment):
				t.Errorf("chose %+v, want %+v", res, want)
			case tc.wantAddr != "" && tc.wantAddr != "-" && res.Address != tc.wantAddr:
				t.Errorf("chose %s, want %s", res.Address, tc.wantAddr)
			case slices.Contains(tc.wantNotIn, res.Address):
				t.Errorf("chose excluded %s", res.Address)
			}
		})
	}
}

// TestPickErrors: answers of a running sidecar are errors, not fallbacks,
// unless FallbackOn says so; a caller's own deadline is the caller's error.
func TestPickErrors(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	static := []client.Endpoint{{Address: "10.0.0.1:8000"}}
	ctx := context.Background()

	p := newPicker(t, cc, client.PickerOptions{Pool: "nope", Fallback: static})
	if _, err := p.Pick(ctx, client.Request{}); status.Code(err) != codes.NotFound || client.Unreachable(err) {
		t.Errorf("unknown pool: %v, want NotFound from the sidecar", err)
	}
	p = newPicker(t, cc, client.PickerOptions{Pool: "nope", Fallback: static,
		FallbackOn: func(err error) bool { return client.Unreachable(err) || status.Code(err) == codes.NotFound }})
	if res, err := p.Pick(ctx, client.Request{}); err != nil || !res.Fallback || status.Code(res.Cause) != codes.NotFound {
		t.Errorf("unknown pool with FallbackOn NotFound: %+v, %v", res, err)
	}

	// A pool with weights but no instance: the sidecar answers Unavailable.
	if _, err := pb.NewAdminServiceClient(cc).SetWeights(ctx, &pb.SetWeightsRequest{AllowNewPool: true, Pool: "m", Weights: map[string]float64{"A": 1}}); err != nil {
		t.Fatal(err)
	}
	p = newPicker(t, cc, client.PickerOptions{Pool: "m", Fallback: static})
	if _, err := p.Pick(ctx, client.Request{}); status.Code(err) != codes.Unavailable || client.Unreachable(err) {
		t.Errorf("pool without instances: %v, want the sidecar's own Unavailable", err)
	}

	// A server that accepts connections but never answers: the Picker's
	// deadline, unreachable, falls back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	p = newPicker(t, dial(t, l.Addr().String()), client.PickerOptions{Pool: "m", Fallback: static, Timeout: 50 * time.Millisecond})
	if res, err := p.Pick(ctx, client.Request{}); err != nil || !res.Fallback || !client.Unreachable(res.Cause) {
		t.Errorf("silent sidecar: %+v, %v; want a fallback after the deadline", res, err)
	}
	// The caller's context ended: its error, no fallback.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if res, err := p.Pick(cctx, client.Request{}); !errors.Is(err, context.Canceled) || res.Fallback {
		t.Errorf("canceled caller: %+v, %v; want context.Canceled", res, err)
	}
}

// TestNewPickerOptions: NewPicker names the option it rejects, and a
// Picker it accepts hashes with the pool's seed and the given block size
// and text chunk, or their defaults.
func TestNewPickerOptions(t *testing.T) {
	const def, chunk = prefixhash.DefaultBlockSize, prefixhash.DefaultTextChunkBytes
	for _, tc := range []struct {
		name         string
		opts         client.PickerOptions
		err          string // substring of the error; "" = accepted
		block, chunk int    // the hasher an accepted Picker uses
	}{
		{"no pool", client.PickerOptions{BlockSize: 8}, "PickerOptions.Pool is empty", 0, 0},
		{"negative block size", client.PickerOptions{Pool: "m", BlockSize: -1, TextChunkBytes: 4}, "PickerOptions.BlockSize -1", 0, 0},
		{"negative chunk", client.PickerOptions{Pool: "m", BlockSize: 8, TextChunkBytes: -2}, "PickerOptions.TextChunkBytes -2", 0, 0},
		{"defaults", client.PickerOptions{Pool: "m"}, "", def, chunk},
		{"given sizes", client.PickerOptions{Pool: "m", BlockSize: 8, TextChunkBytes: 3}, "", 8, 3},
		{"salted", client.PickerOptions{Pool: "m", Salt: "s", BlockSize: 4}, "", 4, chunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := client.NewPicker(nil, tc.opts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || p != nil {
					t.Fatalf("NewPicker = %v, %v; want an error naming %q", p, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewPicker: %v", err)
			}
			want := prefixhash.Hasher{Seed: prefixhash.Seed(tc.opts.Pool, tc.opts.Salt), BlockSize: tc.block, TextChunkBytes: tc.chunk}
			toks := make([]uint32, 3*def)
			for i := range toks {
				toks[i] = uint32(i)
			}
			text := strings.Repeat("the quick brown fox ", 10)
			if got, w := p.Hashes(nil, &client.Request{Tokens: toks}), want.Tokens(nil, toks); !slices.Equal(got, w) || len(w) != len(toks)/tc.block {
				t.Errorf("token hashes %x; want %x", got, w)
			}
			if got, w := p.Hashes(nil, &client.Request{Text: text}), want.Text(nil, text); !slices.Equal(got, w) || len(w) != len(text)/tc.chunk {
				t.Errorf("text hashes %x; want %x", got, w)
			}
		})
	}
}

// TestUnreachable: transport failures and deadlines are unreachable;
// anything the sidecar answered is not.
func TestUnreachable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{status.Error(codes.Unavailable, "x"), true},
		{status.Error(codes.DeadlineExceeded, "x"), true},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), true},
		{status.Error(codes.NotFound, "x"), false},
		{status.Error(codes.Aborted, "x"), false},
		{errors.New("plain"), false},
	} {
		if got := client.Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestPickAudit: the audit level of the options, overridden per request.
func TestPickAudit(t *testing.T) {
	s := startSidecar(t, "127.0.0.1:0", "")
	cc := dial(t, s.addr)
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		reporter(t, cc, client.ReporterOptions{Pool: "m", Deployment: "A", InstanceID: id})
		cachedBlocks(t, s, cc, "m", id, 0)
	}
	p := newPicker(t, cc, client.PickerOptions{Pool: "m", Timeout: 5 * time.Second, Audit: pb.AuditLevel_AUDIT_LEVEL_NONE})
	for _, tc := range []struct {
		level     pb.AuditLevel
		decision  bool
		instances int
	}{
		{pb.AuditLevel_AUDIT_LEVEL_UNSPECIFIED, false, 0}, // the Picker's NONE
		{pb.AuditLevel_AUDIT_LEVEL_CHOSEN, true, 1},
		{pb.AuditLevel_AUDIT_LEVEL_FULL, true, 3},
	} {
		res, err := p.Pick(context.Background(), client.Request{Audit: tc.level})
		if err != nil {
			t.Fatal(err)
		}
		dec := res.Response.GetDecision()
		if (dec != nil) != tc.decision || len(dec.GetInstances()) != tc.instances || res.InstanceID == "" {
			t.Errorf("audit %v: decision %v with %d instances, chose %q", tc.level, dec != nil, len(dec.GetInstances()), res.InstanceID)
		}
	}
	// The default Picker asks for AUDIT_LEVEL_CHOSEN: every deployment, the
	// chosen instance alone.
	def := newPicker(t, cc, client.PickerOptions{Pool: "m", Timeout: 5 * time.Second})
	res, err := def.Pick(context.Background(), client.Request{})
	if err != nil {
		t.Fatal(err)
	}
	dec := res.Response.GetDecision()
	if got := dec.GetInstances(); len(got) != 1 || got[0].GetInstanceId() != res.InstanceID || len(dec.GetDeployments()) != 1 {
		t.Errorf("default audit: %d instances, %d deployments; want the chosen instance %q and 1 deployment",
			len(got), len(dec.GetDeployments()), res.InstanceID)
	}
}
