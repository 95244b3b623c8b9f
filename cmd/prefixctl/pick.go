package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// promptFlags are the flags that describe a prompt, shared by pick and hash.
type promptFlags struct {
	fs                    *flag.FlagSet
	tokens, text, hashes  string
	salt                  string
	blockSize, chunkBytes int
}

func (p *promptFlags) register(fs *flag.FlagSet, withHashes bool) {
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
	p.fs.Visit(func(f *flag.Flag) {
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
func (c *cli) pick(args []string) error {
	fs := c.flagSet(c.cmd)
	var pf promptFlags
	pf.register(fs, true)
	promptTokens := fs.Uint("prompt-tokens", 0, "prompt length `N` in tokens (default: from the prompt)")
	seed := fs.Uint64("seed", 0, "`N`, the seed of the draws, for a reproducible decision")
	exclude := fs.String("exclude", "", "instance ids `ID,...` not to choose")
	requestID := fs.String("request-id", "", "request `ID` for the sidecar's logs")
	explain := fs.Bool("explain", false, "print the decision's audit")
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	req, err := pf.request()
	if err != nil {
		return err
	}
	if *promptTokens > 1<<32-1 {
		return usagef("--prompt-tokens %d: the limit is %d", *promptTokens, uint32(1<<32-1))
	}
	req.PromptTokens, req.RequestID, req.Exclude = uint32(*promptTokens), *requestID, splitList(*exclude)
	req.Audit = pb.AuditLevel_AUDIT_LEVEL_FULL // --explain and -o json show all of it
	fs.Visit(func(f *flag.Flag) {
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

// hash is 'prefixctl hash POOL ...': the prompt's block hashes.
func (c *cli) hash(args []string) error {
	fs := c.flagSet(c.cmd)
	var pf promptFlags
	pf.register(fs, false)
	pos, err := c.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
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
