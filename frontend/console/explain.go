package console

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// MaxExplainTokens bounds the token ids of one explain: the most
// pkg/prefixhash hashes at the largest block size the form offers
// (MaxBlocks blocks of 64 tokens).
const MaxExplainTokens = prefixhash.MaxBlocks * 64

// explainRequest is the body of POST /ui/api/explain: the prompt as text
// or as token ids ("1,2,3" and ranges "0-63"), hashed as pkg/client
// hashes it for the pool (salt, block size, text chunk bytes), and an
// optional seed (a decimal string; empty: the router draws one).
type explainRequest struct {
	Pool         string `json:"pool"`
	Text         string `json:"text"`
	Tokens       string `json:"tokens"`
	Salt         string `json:"salt"`
	BlockSize    int    `json:"block_size"`
	ChunkBytes   int    `json:"chunk_bytes"`
	Seed         string `json:"seed"`
	PromptTokens uint32 `json:"prompt_tokens"`
}

// explain is POST /ui/api/explain: a Pick with the full audit
// (AUDIT_LEVEL_FULL), authorized as PickService.Pick (the gateway role):
// it is a real pick, counted and recorded like any other.
func (c *console) explain(w http.ResponseWriter, r *http.Request) {
	var in explainRequest
	if err := decode(r, &in); err != nil {
		fail(w, err)
		return
	}
	req, err := in.pickRequest()
	if err != nil {
		fail(w, err)
		return
	}
	ctx, err := c.authorize(r, pb.PickService_Pick_FullMethodName)
	if err != nil {
		fail(w, err)
		return
	}
	resp, err := c.b.PickFor(ctx, req, frontend.PickMeta{Service: "prefixroute.console", Method: "Explain"})
	answer(w, resp, err)
}

// pickRequest checks the body and builds the Pick it asks for.
func (in *explainRequest) pickRequest() (*pb.PickRequest, error) {
	if in.Pool == "" {
		return nil, badf("pool is required")
	}
	if in.BlockSize == 0 {
		in.BlockSize = prefixhash.DefaultBlockSize
	}
	if in.ChunkBytes == 0 {
		in.ChunkBytes = prefixhash.DefaultTextChunkBytes
	}
	if in.BlockSize < 1 || in.BlockSize > 64 || in.ChunkBytes < 1 || in.ChunkBytes > 4096 {
		return nil, badf("block_size %d, chunk_bytes %d: want block_size in 1..64 tokens and chunk_bytes in 1..4096 bytes", in.BlockSize, in.ChunkBytes)
	}
	h := prefixhash.New(in.Pool, in.Salt)
	h.BlockSize, h.TextChunkBytes = in.BlockSize, in.ChunkBytes
	req := &pb.PickRequest{Pool: in.Pool, Audit: pb.AuditLevel_AUDIT_LEVEL_FULL, RequestId: "console-explain", PromptTokens: in.PromptTokens}
	n := 0
	switch {
	case in.Text != "" && in.Tokens != "":
		return nil, badf("give the prompt once: text or tokens, not both")
	case in.Tokens != "":
		toks, err := parseTokens(in.Tokens)
		if err != nil {
			return nil, err
		}
		req.PrefixHashes, n = h.Tokens(nil, toks), len(toks)
	case in.Text != "":
		req.PrefixHashes, n = h.Text(nil, in.Text), len(in.Text)*in.BlockSize/in.ChunkBytes
	default:
		return nil, badf("the prompt is empty: give text or tokens")
	}
	if req.PromptTokens == 0 {
		req.PromptTokens = uint32(n)
	}
	if in.Seed != "" {
		s, err := strconv.ParseUint(strings.TrimSpace(in.Seed), 10, 64)
		if err != nil {
			return nil, badf("seed is %q; want a whole number in 0..%d, or empty for a random draw", in.Seed, uint64(1<<64-1))
		}
		req.Seed = &s
	}
	return req, nil
}

// parseTokens parses token ids separated by commas or white space, with
// ranges a-b (inclusive), at most MaxExplainTokens in all.
func parseTokens(s string) ([]uint32, error) {
	var out []uint32
	for f := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return nil, badf("tokens: %q is not a token id (a whole number below 2^32) or a range a-b", f)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 32); err != nil || b < a {
				return nil, badf("tokens: range %q: want a-b with a <= b, both token ids", f)
			}
		}
		if uint64(len(out))+b-a+1 > MaxExplainTokens {
			return nil, badf("tokens: more than %d token ids (the most the console hashes)", MaxExplainTokens)
		}
		for t := a; t <= b; t++ {
			out = append(out, uint32(t))
		}
	}
	if len(out) == 0 {
		return nil, badf("tokens: no token ids found")
	}
	return out, nil
}

// decisions is GET /ui/api/decisions?pool=P: the decision log's latest
// sampled picks of the pool, newest first, for Explain to show without
// picking again. Authorized as GetWeights (operator-read): it is the
// pool's routing, as the decision log file holds it.
func (c *console) decisions(w http.ResponseWriter, r *http.Request) {
	pool, err := query(r, "pool", true)
	if err != nil {
		fail(w, err)
		return
	}
	if _, err := c.authorize(r, pb.AdminService_GetWeights_FullMethodName); err != nil {
		fail(w, err)
		return
	}
	lines, on := c.b.RecentDecisions(pool)
	if lines == nil {
		lines = []json.RawMessage{}
	}
	writeJSON(w, struct {
		Enabled   bool              `json:"enabled"`
		Decisions []json.RawMessage `json:"decisions"`
	}{on, lines})
}
