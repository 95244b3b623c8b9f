package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
	"github.com/spf13/pflag"
)

// promptFlags are the flags that describe a prompt, shared by pick and hash.
type promptFlags struct {
	fs                    *pflag.FlagSet
	tokens, text, hashes  string
	salt                  string
	blockSize, chunkBytes int
}

func (p *promptFlags) register(fs *pflag.FlagSet, withHashes bool) {
	p.fs = fs
	fs.StringVar(&p.tokens, "tokens", "", "token ids and ranges `IDS`, e.g. 1,2,3 or 0-63 (token mode)")
	fs.StringVar(&p.text, "text", "", "prompt `TEXT` (text mode)")
	if withHashes {
		fs.StringVar(&p.hashes, "hashes", "", "pre-computed block hashes `H,...` (decimal or 0x-hex)")
	}
	fs.StringVar(&p.salt, "salt", "", "tenant salt `S` of the hashes")
	fs.IntVar(&p.blockSize, "block-size", prefixhash.DefaultBlockSize, "`N` tokens per block")
	fs.IntVar(&p.chunkBytes, "chunk-bytes", prefixhash.DefaultTextChunkBytes, "`N` bytes per text chunk")
}

// request builds the client request the flags describe.
func (p *promptFlags) request() (client.Request, error) {
	var req client.Request
	given := 0
	p.fs.Visit(func(f *pflag.Flag) {
		if f.Name == "tokens" || f.Name == "text" || f.Name == "hashes" {
			given++
		}
	})
	if given > 1 {
		return req, usagef("give the prompt once: --tokens, --text or --hashes")
	}
	if p.blockSize <= 0 || p.chunkBytes <= 0 {
		return req, usagef("--block-size %d --chunk-bytes %d: want positive sizes", p.blockSize, p.chunkBytes)
	}
	var err error
	switch {
	case p.hashes != "":
		if req.Hashes, err = parseHashes(p.hashes); err != nil {
			return req, usagef("--hashes: %v", err)
		}
	case p.tokens != "":
		if req.Tokens, err = parseTokens(p.tokens); err != nil {
			return req, usagef("--tokens: %v", err)
		}
	default:
		req.Text = p.text
	}
	return req, nil
}

func (p *promptFlags) pickerOptions(pool string) client.PickerOptions {
	return client.PickerOptions{Pool: pool, Salt: p.salt, BlockSize: p.blockSize, TextChunkBytes: p.chunkBytes}
}

// pick is 'prefixctl pick POOL ...'.
func (c *cli) pick(fs *pflag.FlagSet) runner {
	var pf promptFlags
	pf.register(fs, true)
	promptTokens := fs.Uint("prompt-tokens", 0, "prompt length `N` in tokens (default: from the prompt)")
	seed := fs.Uint64("seed", 0, "`N`, the seed of the draws, for a reproducible decision")
	exclude := fs.String("exclude", "", "instance ids `ID,...` not to choose")
	requestID := fs.String("request-id", "", "request `ID` for the sidecar's logs")
	explain := fs.Bool("explain", false, "print the decision's audit (asks for --audit full)")
	sloMs := fs.Float64("slo-ms", 0, "the request's TTFT target in `MS` (ttft_slo_ms; 0: none)")
	audit := fs.String("audit", "", "how much of the decision the sidecar returns: `LEVEL` chosen, full or none (default chosen; full with --explain)")
	return func(pos []string) error {
		req, err := pf.request()
		if err != nil {
			return err
		}
		if *promptTokens > 1<<32-1 {
			return usagef("--prompt-tokens %d: the limit is %d", *promptTokens, uint32(1<<32-1))
		}
		req.PromptTokens, req.RequestID, req.Exclude = uint32(*promptTokens), *requestID, splitList(*exclude)
		if v := *sloMs; !(v >= 0 && v <= 3_600_000) {
			return usagef("--slo-ms %v: want 0 (none) or a number of ms in (0, 3600000]", v)
		}
		req.TTFTSLOMs = *sloMs
		if req.Audit, err = auditLevel(*audit, *explain); err != nil {
			return err
		}
		fs.Visit(func(f *pflag.Flag) {
			if f.Name == "seed" {
				req.Seed = seed
			}
		})
		cc, err := c.conn()
		if err != nil {
			return err
		}
		opts := pf.pickerOptions(pos[0])
		opts.Timeout = c.timeout
		picker, err := client.NewPicker(cc, opts)
		if err != nil {
			return usagef("%v", err)
		}
		res, err := picker.Pick(c.ctx, req)
		if err != nil {
			return err
		}
		if c.output == "json" {
			return writeJSON(c.stdout, res.Response)
		}
		renderPick(c.stdout, res.Response, *explain)
		return nil
	}
}

// hash is 'prefixctl hash POOL ...': the prompt's block hashes.
func (c *cli) hash(fs *pflag.FlagSet) runner {
	var pf promptFlags
	pf.register(fs, false)
	return func(pos []string) error {
		req, err := pf.request()
		if err != nil {
			return err
		}
		picker, err := client.NewPicker(nil, pf.pickerOptions(pos[0]))
		if err != nil {
			return usagef("%v", err)
		}
		hashes := picker.Hashes(nil, &req)
		out := make([]string, len(hashes))
		for i, h := range hashes {
			out[i] = fmtHash(h)
		}
		if c.output == "json" {
			return writeHashesJSON(c.stdout, pos[0], out)
		}
		fmt.Fprintln(c.stdout, strings.Join(out, ","))
		return nil
	}
}

// writeHashesJSON prints hash's JSON output: {"pool": ..., "hashes": [...]}.
func writeHashesJSON(w io.Writer, pool string, hashes []string) error {
	b, err := json.MarshalIndent(struct {
		Pool   string   `json:"pool"`
		Hashes []string `json:"hashes"`
	}{pool, hashes}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// auditLevel is the audit a pick asks for: --audit when given, else the
// full audit for --explain and only the chosen instance's part otherwise
// (what gateways ask; a full audit of a large pool is about 100 bytes per
// instance).
func auditLevel(flag string, explain bool) (pb.AuditLevel, error) {
	switch flag {
	case "":
		if explain {
			return pb.AuditLevel_AUDIT_LEVEL_FULL, nil
		}
		return pb.AuditLevel_AUDIT_LEVEL_CHOSEN, nil
	case "full":
		return pb.AuditLevel_AUDIT_LEVEL_FULL, nil
	case "chosen":
		return pb.AuditLevel_AUDIT_LEVEL_CHOSEN, nil
	case "none":
		return pb.AuditLevel_AUDIT_LEVEL_NONE, nil
	}
	return 0, usagef("--audit %q: want chosen, full or none", flag)
}
