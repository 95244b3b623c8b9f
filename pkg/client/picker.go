package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// DefaultPickTimeout is the deadline of one Pick when the caller's context
// has no earlier one: 100ms. A sidecar on loopback answers in well under a
// millisecond; the deadline bounds what a hung sidecar costs a request.
const DefaultPickTimeout = 100 * time.Millisecond

// PickerOptions configures a Picker. Zero fields take the defaults stated.
type PickerOptions struct {
	// Pool names the pool (model) to pick from. Required.
	Pool string
	// Salt isolates tenants: requests hashed with different salts never
	// share cache hits (see prefixhash.Seed). Default "": no salt. A Picker
	// has one salt; make one Picker per tenant, all on one connection.
	Salt string
	// BlockSize is the number of tokens per block in token mode. Default
	// prefixhash.DefaultBlockSize (16). Use the instances' KV block size.
	BlockSize int
	// TextChunkBytes is the number of bytes per chunk in text mode. Default
	// prefixhash.DefaultTextChunkBytes (64).
	TextChunkBytes int
	// Timeout is the deadline of one Pick call, applied unless the caller's
	// context ends earlier. Default DefaultPickTimeout (100ms); negative
	// means no deadline but the caller's.
	Timeout time.Duration
	// Fallback is the static list Pick chooses from when the sidecar cannot
	// answer (see FallbackOn). Default empty: Pick returns the error instead.
	Fallback []Endpoint
	// FallbackOn decides which Pick errors use Fallback. Default
	// Unreachable: the sidecar could not be reached or did not answer
	// within Timeout. A gateway that also wants a static choice while the
	// sidecar knows no instance of the pool (for example just after a
	// sidecar restart, before the instances reconnect) can add
	// codes.NotFound and the sidecar's own codes.Unavailable here.
	FallbackOn func(error) bool
	// Audit is how much of the decision the sidecar returns in
	// Result.Response (the choice is the same at every level). 0
	// (AUDIT_LEVEL_UNSPECIFIED) means AUDIT_LEVEL_CHOSEN: every
	// deployment's probability plus the chosen instance's, the auditable
	// answer, and the sidecar computes instance probabilities for the
	// chosen deployment only. AUDIT_LEVEL_FULL lists every instance (about
	// 100 bytes each, and the sidecar's work grows with the pool): set it
	// here, or on Request.Audit for the requests a gateway samples.
	// AUDIT_LEVEL_NONE returns the choice alone.
	Audit pb.AuditLevel
	// CallOptions are added to every Pick call.
	CallOptions []grpc.CallOption
}

// Request is one request to route. Give the prompt one way: Hashes (already
// computed), else Tokens (token mode), else Text (text mode); the first set
// one is used. A request with none of them carries no prefix information:
// every hit ratio is 0 and the choice follows weights and load only.
type Request struct {
	// Hashes are pre-computed chained block hashes, first block first, as
	// prefixhash produces them. Used as given when not nil.
	Hashes []uint64
	// Tokens are the prompt's token ids, hashed in blocks of
	// PickerOptions.BlockSize with the Picker's pool seed.
	Tokens []uint32
	// Text is the prompt's text, hashed in chunks of
	// PickerOptions.TextChunkBytes bytes with the Picker's pool seed.
	Text string
	// PromptTokens is the prompt's length in tokens. Default: len(Tokens)
	// in token mode; len(Hashes)*BlockSize with Hashes; in text mode
	// len(Text)*BlockSize/TextChunkBytes (4 bytes a token at the defaults,
	// so that a matched chunk counts as one block of tokens).
	PromptTokens uint32
	// RequestID is echoed in the sidecar's logs.
	RequestID string
	// Exclude names instances not to choose (a retry). The fallback honours
	// it too, by instance id or address.
	Exclude []string
	// Seed makes the sidecar's draw reproducible; nil lets it draw one.
	Seed *uint64
	// Load overrides the sidecar's view of some instances' load for this
	// pick only.
	Load []*pb.InstanceLoad
	// Audit overrides PickerOptions.Audit for this pick when set.
	Audit pb.AuditLevel
	// TTFTSLOMs is the request's time-to-first-token target in ms
	// (PickRequest.ttft_slo_ms); 0 for none. A target the pool cannot meet
	// under on_slo_miss shed is an error (RESOURCE_EXHAUSTED, reason
	// SLO_UNATTAINABLE), never a fallback.
	TTFTSLOMs float64
}

// Result is the instance chosen for a request.
type Result struct {
	// Address is what to connect to, as the instance reported it (or as the
	// fallback list gives it).
	Address    string
	InstanceID string
	Deployment string
	// Fallback is true when the sidecar did not choose: the instance comes
	// from PickerOptions.Fallback, and Cause says why the sidecar was not
	// used.
	Fallback bool
	Cause    error
	// Response is the sidecar's answer with the decision's audit (as much
	// of it as the audit level asked for); nil for a fallback.
	Response *pb.PickResponse
}

// Picker asks the sidecar which instance should serve a request, hashing the
// prompt on the way. It is safe for concurrent use; make one per pool (and
// salt) and share it between goroutines. It does not own the connection.
type Picker struct {
	rpc    pb.PickServiceClient
	opts   PickerOptions
	hasher prefixhash.Hasher
	bufs   sync.Pool // of *[]uint64
}

// NewPicker returns a Picker over cc, normally a connection from Dial shared
// with the process's other Pickers. It fails only on invalid options.
func NewPicker(cc grpc.ClientConnInterface, opts PickerOptions) (*Picker, error) {
	if opts.Pool == "" {
		return nil, errors.New("client: PickerOptions.Pool is empty; name the pool to pick from")
	}
	if opts.BlockSize < 0 {
		return nil, fmt.Errorf("client: PickerOptions.BlockSize %d is negative", opts.BlockSize)
	}
	if opts.TextChunkBytes < 0 {
		return nil, fmt.Errorf("client: PickerOptions.TextChunkBytes %d is negative", opts.TextChunkBytes)
	}
	if opts.BlockSize == 0 {
		opts.BlockSize = prefixhash.DefaultBlockSize
	}
	if opts.TextChunkBytes == 0 {
		opts.TextChunkBytes = prefixhash.DefaultTextChunkBytes
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultPickTimeout
	}
	if opts.Audit == pb.AuditLevel_AUDIT_LEVEL_UNSPECIFIED {
		opts.Audit = pb.AuditLevel_AUDIT_LEVEL_CHOSEN
	}
	if opts.FallbackOn == nil {
		opts.FallbackOn = Unreachable
	}
	opts.Fallback = append([]Endpoint(nil), opts.Fallback...)
	p := &Picker{rpc: pb.NewPickServiceClient(cc), opts: opts}
	p.hasher = prefixhash.Hasher{Seed: prefixhash.Seed(opts.Pool, opts.Salt),
		BlockSize: opts.BlockSize, TextChunkBytes: opts.TextChunkBytes}
	return p, nil
}

// Hashes appends the block hashes Pick sends for req to dst: req.Hashes as
// they are, else the token-mode or text-mode hashes of the prompt.
func (p *Picker) Hashes(dst []uint64, req *Request) []uint64 {
	switch {
	case req.Hashes != nil:
		return append(dst, req.Hashes...)
	case req.Tokens != nil:
		return p.hasher.Tokens(dst, req.Tokens)
	default:
		return p.hasher.Text(dst, req.Text)
	}
}

// promptTokens is req.PromptTokens or its default.
func (p *Picker) promptTokens(req *Request) uint32 {
	if req.PromptTokens != 0 {
		return req.PromptTokens
	}
	var n int
	switch {
	case req.Hashes != nil:
		n = len(req.Hashes) * p.opts.BlockSize
	case req.Tokens != nil:
		n = len(req.Tokens)
	default:
		n = len(req.Text) * p.opts.BlockSize / p.opts.TextChunkBytes
	}
	return uint32(min(n, math.MaxUint32))
}

// Pick asks the sidecar for an instance for req. When the call fails with an
// error that PickerOptions.FallbackOn accepts and a fallback list is set,
// Pick chooses from that list instead (see Endpoint) and returns it with
// Fallback set and no error. When the caller's own context has ended, Pick
// returns the context's error and no fallback. Otherwise the error is the
// call's gRPC status error as is (status.FromError and status.Code work on
// it; Unreachable tells a transport failure from the sidecar's answer).
func (p *Picker) Pick(ctx context.Context, req Request) (Result, error) {
	hashes := req.Hashes
	if hashes == nil {
		bp, _ := p.bufs.Get().(*[]uint64)
		if bp == nil {
			bp = new([]uint64)
		}
		hashes = p.Hashes((*bp)[:0], &req)
		defer func() { *bp = hashes[:0]; p.bufs.Put(bp) }()
	}

	in := &pb.PickRequest{Pool: p.opts.Pool, PrefixHashes: hashes, PromptTokens: p.promptTokens(&req),
		RequestId: req.RequestID, ExcludeInstances: req.Exclude, Seed: req.Seed, Audit: p.opts.Audit, TtftSloMs: req.TTFTSLOMs}
	if req.Audit != pb.AuditLevel_AUDIT_LEVEL_UNSPECIFIED {
		in.Audit = req.Audit
	}
	if len(req.Load) > 0 {
		in.LoadSnapshot = &pb.LoadSnapshot{Instances: req.Load}
	}
	callCtx := ctx
	if p.opts.Timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, p.opts.Timeout)
		defer cancel()
	}
	var trailer metadata.MD
	opts := append([]grpc.CallOption{grpc.Trailer(&trailer)}, p.opts.CallOptions...)
	resp, err := p.rpc.Pick(callCtx, in, opts...)
	if err == nil {
		return Result{Address: resp.GetAddress(), InstanceID: resp.GetInstanceId(),
			Deployment: resp.GetDeployment(), Response: resp}, nil
	}
	err = classify(err, trailer)
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	if len(p.opts.Fallback) > 0 && p.opts.FallbackOn(err) {
		key, keyed := uint64(0), len(hashes) > 0
		if keyed {
			key = hashes[0]
		}
		if i := rendezvous(p.opts.Fallback, key, keyed, req.Exclude); i >= 0 {
			e := p.opts.Fallback[i]
			return Result{Address: e.Address, InstanceID: e.InstanceID, Deployment: e.Deployment,
				Fallback: true, Cause: err}, nil
		}
		return Result{}, fmt.Errorf("client: pick from pool %q: sidecar failed (%w) and every fallback endpoint is excluded",
			p.opts.Pool, err)
	}
	return Result{}, err
}
