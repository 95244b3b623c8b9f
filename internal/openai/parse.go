// Package openai maps an OpenAI-style request body (/v1/completions,
// /v1/chat/completions, /v1/responses, /v1/embeddings) to what a Pick needs:
// the model, the prompt as token ids or as a canonical text, and an
// estimate of its length in tokens. Front ends (the ext_proc endpoint
// picker, an HTTP /v1/route) share it. Its functions are safe for
// concurrent use.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// DefaultMaxBodyBytes is the largest body Parse accepts by default: 16 MiB.
const DefaultMaxBodyBytes = 16 << 20

// Sentinel errors; front ends map them to statuses (HTTPStatus).
var (
	// ErrBadBody: the body is not a valid request of its endpoint.
	ErrBadBody = errors.New("invalid request body")
	// ErrBodyTooLarge: the body is over the limit.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrUnknownEndpoint: the path is none of the four endpoints.
	ErrUnknownEndpoint = errors.New("unknown endpoint")
)

// Endpoint is one of the request kinds Parse understands.
type Endpoint uint8

// The endpoints, by path.
const (
	Completions Endpoint = iota + 1
	ChatCompletions
	Responses
	Embeddings
)

// EndpointOf returns the endpoint of a request path (query string ignored).
func EndpointOf(path string) (Endpoint, error) {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	switch path {
	case "/v1/completions":
		return Completions, nil
	case "/v1/chat/completions":
		return ChatCompletions, nil
	case "/v1/responses":
		return Responses, nil
	case "/v1/embeddings":
		return Embeddings, nil
	}
	return 0, fmt.Errorf("%w: %q is not /v1/completions, /v1/chat/completions, /v1/responses or /v1/embeddings", ErrUnknownEndpoint, path)
}

// Request is what routing needs of one parsed body.
type Request struct {
	Model string
	// Tokens are the prompt's token ids when the body carries them (a
	// completions or embeddings prompt of integers); nil otherwise.
	Tokens []uint32
	// Text is the canonical serialization of the prompt (pkg/prefixhash
	// README, "Text of an OpenAI request") when Tokens is nil.
	Text string
}

// PromptTokens is the prompt length in tokens: len(Tokens), or estimated
// from Text as ceil(len(Text bytes) / 4), the BPE average of about 4 bytes
// of English text per token.
func (r *Request) PromptTokens() uint32 {
	if r.Tokens != nil {
		return uint32(len(r.Tokens))
	}
	return uint32((len(r.Text) + 3) / 4)
}

// body is the union of the fields Parse reads; unknown fields are ignored.
type body struct {
	Model    string          `json:"model"`
	Prompt   json.RawMessage `json:"prompt"`
	Input    json.RawMessage `json:"input"`
	Messages []message       `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Parse decodes body for endpoint e. A body over max bytes (0:
// DefaultMaxBodyBytes) is ErrBodyTooLarge; anything not a valid request is
// ErrBadBody with a message naming what is wrong.
func Parse(e Endpoint, data []byte, max int) (*Request, error) {
	if max <= 0 {
		max = DefaultMaxBodyBytes
	}
	if len(data) > max {
		return nil, fmt.Errorf("%w: %d bytes; the limit is %d bytes", ErrBodyTooLarge, len(data), max)
	}
	var b body
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&b); err != nil {
		return nil, bodyError(err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrBadBody)
	}
	if b.Model == "" {
		return nil, fmt.Errorf("%w: model is missing or empty", ErrBadBody)
	}
	r := &Request{Model: b.Model}
	var err error
	switch e {
	case Completions:
		err = r.prompt("prompt", b.Prompt)
	case Embeddings, Responses:
		if e == Responses && len(b.Input) > 0 && bytes.TrimSpace(b.Input)[0] == '[' {
			if ms, ok := messagesOf(b.Input); ok {
				r.Text, err = canonical(b.Tools, ms)
				break
			}
		}
		err = r.prompt("input", b.Input)
	case ChatCompletions:
		if len(b.Messages) == 0 {
			return nil, fmt.Errorf("%w: messages is missing or empty", ErrBadBody)
		}
		r.Text, err = canonical(b.Tools, b.Messages)
	default:
		return nil, fmt.Errorf("%w: endpoint %d", ErrUnknownEndpoint, e)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// prompt reads a string, a list of strings, or a list of token ids.
func (r *Request) prompt(field string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return fmt.Errorf("%w: %s is missing", ErrBadBody, field)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		r.Text = s
		return nil
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		r.Text = strings.Join(ss, "\n")
		return nil
	}
	var ids []uint32
	if json.Unmarshal(raw, &ids) == nil {
		r.Tokens = ids
		if ids == nil {
			r.Tokens = []uint32{}
		}
		return nil
	}
	var batch [][]uint32
	if json.Unmarshal(raw, &batch) == nil && len(batch) > 0 {
		r.Tokens = batch[0]
		return nil
	}
	return fmt.Errorf("%w: %s is not a string, a list of strings or a list of token ids (integers in [0, 2^32))", ErrBadBody, field)
}

// messagesOf reads a /v1/responses input list as messages.
func messagesOf(raw json.RawMessage) ([]message, bool) {
	var ms []message
	if json.Unmarshal(raw, &ms) != nil || len(ms) == 0 || ms[0].Role == "" {
		return nil, false
	}
	return ms, true
}
