// Package gateway turns a gateway's HTTP request (an OpenAI-style body and
// its headers) into a pb.PickRequest, and a failed pick into an HTTP
// answer. It is shared by the front ends that see HTTP requests rather than
// PickRequests: the Envoy ext_proc endpoint picker (frontend/extproc) and the
// HTTP /v1/route endpoint. A Mapper is safe for concurrent use; so are the
// package's functions.
package gateway

import (
	"errors"
	"fmt"
	"strings"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/openai"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// Header names of the gateway protocol (Gateway API Inference Extension,
// proposal 004 "endpoint picker protocol").
const (
	// ReasonHeader names why a request got no instance, on the error
	// answer (one of the Reason* tokens).
	ReasonHeader = "x-prefixroute-reason"
	// DestinationHeader carries the chosen "ip:port", then the fallbacks,
	// comma-separated.
	DestinationHeader = "x-gateway-destination-endpoint"
	// RequestIDHeader is the request id copied into PickRequest.request_id.
	RequestIDHeader = "x-request-id"
)

// ErrNoPool: the request names no pool (an empty pool header or model
// mapping). Unknown pools are the router's NotFound instead.
var ErrNoPool = errors.New("no pool for the request")

// Config says how a request names its pool and how large its body may be.
type Config struct {
	// ModelPools maps a model or LoRA adapter name to its pool; it is
	// checked first.
	ModelPools map[string]string
	// DefaultPool is the pool of a model not in ModelPools; "" means the
	// body's model names the pool.
	DefaultPool string
	// PoolHeader is a request header (any case) whose value names the
	// pool, overriding the model; "" means none.
	PoolHeader string
	// MaxBodyBytes is the largest body Map parses; 0 means
	// openai.DefaultMaxBodyBytes (16 MiB).
	MaxBodyBytes int
	// MaxPrefixBlocks is the most prefix hashes Map sends, the daemon's
	// --max-prefix-blocks; a longer prompt's hashes are cut to its first
	// MaxPrefixBlocks. 0 means prefixhash.MaxBlocks (8192).
	MaxPrefixBlocks int
	// BodyBudget is the daemon-wide budget of buffered request body bytes
	// the front ends using this Config share (--max-buffered-body-bytes);
	// nil means no limit beyond MaxBodyBytes per request. Map does not use
	// it; the front end that buffers a body charges it.
	BodyBudget *BodyBudget
}

// Mapper maps gateway requests to PickRequests under one Config. It is
// immutable after NewMapper and safe for concurrent use.
type Mapper struct {
	cfg       Config
	blockSize func(pool string) int
}

// NewMapper checks cfg and returns its Mapper. blockSize gives a pool's
// block_size_tokens, the block size of token-mode hashes (0 or a nil func
// means prefixhash.DefaultBlockSize, 16 tokens).
func NewMapper(cfg Config, blockSize func(pool string) int) (*Mapper, error) {
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("gateway: max body bytes is %d; want >= 0 (0: %d bytes)", cfg.MaxBodyBytes, openai.DefaultMaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = openai.DefaultMaxBodyBytes
	}
	if cfg.MaxPrefixBlocks < 0 {
		return nil, fmt.Errorf("gateway: max prefix blocks is %d; want >= 0 (0: %d)", cfg.MaxPrefixBlocks, prefixhash.MaxBlocks)
	}
	if cfg.MaxPrefixBlocks == 0 || cfg.MaxPrefixBlocks > prefixhash.MaxBlocks {
		cfg.MaxPrefixBlocks = prefixhash.MaxBlocks
	}
	for model, pool := range cfg.ModelPools {
		if model == "" || pool == "" {
			return nil, fmt.Errorf("gateway: model pools: %q=%q; want a non-empty model and pool", model, pool)
		}
	}
	cfg.PoolHeader = strings.ToLower(strings.TrimSpace(cfg.PoolHeader))
	m := make(map[string]string, len(cfg.ModelPools))
	for k, v := range cfg.ModelPools {
		m[k] = v
	}
	cfg.ModelPools = m
	if blockSize == nil {
		blockSize = func(string) int { return 0 }
	}
	return &Mapper{cfg: cfg, blockSize: blockSize}, nil
}

// Config returns the mapper's configuration with its defaults filled in.
func (m *Mapper) Config() Config { return m.cfg }

// Request is one gateway request as Map needs it.
type Request struct {
	// Path is the request path, e.g. /v1/chat/completions (query ignored).
	Path string
	// Header returns a request header's value by its lower-case name, ""
	// when absent; nil means no headers.
	Header func(name string) string
	// Body is the whole request body.
	Body []byte
	// Pool is an explicit pool (e.g. ?pool=); it wins over everything.
	Pool string
}

func (r *Request) header(name string) string {
	if r.Header == nil || name == "" {
		return ""
	}
	return r.Header(name)
}

// textBytesPerToken is the bytes of text a token stands for in text mode:
// the divisor of openai.Request.PromptTokens's estimate.
const textBytesPerToken = 4

// Map parses r and fills dst: Pool (r.Pool, else the pool header, else
// ModelPools[model], else DefaultPool, else the model), PrefixHashes (the
// prompt's token ids in prefixhash token mode with the pool's block size;
// otherwise its canonical text, pkg/prefixhash README "Text of an OpenAI
// request", in text mode with chunks of 4 bytes per token of the pool's block size:
// 64 bytes, prefixhash.DefaultTextChunkBytes, at the default 16), at most
// MaxPrefixBlocks of them, PromptTokens (the number of token ids, else
// openai.Request.PromptTokens's estimate, ceil(text bytes / 4)) and
// RequestId (the x-request-id header) and TtftSloMs (SLOHeader, ParseSLO). It reuses dst.PrefixHashes's array
// and leaves dst's other fields (exclusions, audit level, seed) to the
// caller. Errors wrap openai's sentinels (ErrBadBody, ErrBodyTooLarge,
// ErrUnknownEndpoint), ErrNoPool or ErrBadHeader; ErrorFor maps them to HTTP answers.
func (m *Mapper) Map(r Request, dst *pb.PickRequest) error {
	e, err := openai.EndpointOf(r.Path)
	if err != nil {
		return err
	}
	if len(r.Body) > m.cfg.MaxBodyBytes {
		return fmt.Errorf("%w: %d bytes; the limit is %d bytes", openai.ErrBodyTooLarge, len(r.Body), m.cfg.MaxBodyBytes)
	}
	req, err := openai.Parse(e, r.Body, m.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	pool, err := m.pool(&r, req.Model)
	if err != nil {
		return err
	}
	slo, err := ParseSLO(r.header(SLOHeader))
	if err != nil {
		return err
	}
	seed := prefixhash.Seed(pool, "")
	hashes := dst.PrefixHashes[:0]
	bs := m.blockSize(pool)
	if bs <= 0 {
		bs = prefixhash.DefaultBlockSize
	}
	if req.Tokens != nil {
		if n := m.cfg.MaxPrefixBlocks * bs; n < len(req.Tokens) {
			hashes = prefixhash.Tokens(hashes, seed, bs, req.Tokens[:n])
		} else {
			hashes = prefixhash.Tokens(hashes, seed, bs, req.Tokens)
		}
	} else {
		// A chunk stands for one block: 4 bytes a token, the estimate
		// PromptTokens uses, so the estimate covers every chunk hashed and
		// a matched chunk counts as the block_size_tokens the cost model
		// takes it for (64 bytes at the default 16-token block).
		chunk := textBytesPerToken * bs
		text := req.Text
		if n := m.cfg.MaxPrefixBlocks * chunk; n < len(text) {
			text = text[:n]
		}
		hashes = prefixhash.Text(hashes, seed, chunk, text)
	}
	dst.Pool = pool
	dst.PrefixHashes = hashes
	dst.PromptTokens = req.PromptTokens()
	dst.RequestId = r.header(RequestIDHeader)
	dst.TtftSloMs = slo
	return nil
}

// pool resolves the request's pool.
func (m *Mapper) pool(r *Request, model string) (string, error) {
	if r.Pool != "" {
		return r.Pool, nil
	}
	if m.cfg.PoolHeader != "" {
		if p := strings.TrimSpace(r.header(m.cfg.PoolHeader)); p != "" {
			return p, nil
		}
	}
	if p, ok := m.cfg.ModelPools[model]; ok {
		return p, nil
	}
	if m.cfg.DefaultPool != "" {
		return m.cfg.DefaultPool, nil
	}
	if model == "" {
		return "", fmt.Errorf("%w: the body names no model", ErrNoPool)
	}
	return model, nil
}
