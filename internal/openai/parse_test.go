package openai

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		e      Endpoint
		body   string
		text   string
		tokens []uint32
		err    error
	}{
		{"completion string", Completions, `{"model":"m","prompt":"hello","x":1}`, "hello", nil, nil},
		{"completion list", Completions, `{"model":"m","prompt":["a","b"]}`, "a\nb", nil, nil},
		{"completion ids", Completions, `{"model":"m","prompt":[1,2,3]}`, "", []uint32{1, 2, 3}, nil},
		{"chat", ChatCompletions, `{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"U"}]}]}`, "system\nS\nuser\nU\n", nil, nil},
		{"chat tools first", ChatCompletions, `{"model":"m","tools":[ {"a": 1} ],"messages":[{"role":"user","content":"U"}]}`, "tools\n[{\"a\":1}]\nuser\nU\n", nil, nil},
		{"responses string", Responses, `{"model":"m","input":"hi"}`, "hi", nil, nil},
		{"responses messages", Responses, `{"model":"m","input":[{"role":"user","content":"hi"}]}`, "user\nhi\n", nil, nil},
		{"embeddings", Embeddings, `{"model":"m","input":["x"]}`, "x", nil, nil},
		{"not json", ChatCompletions, `{"model":`, "", nil, ErrBadBody},
		{"no model", ChatCompletions, `{"messages":[{"role":"user","content":"U"}]}`, "", nil, ErrBadBody},
		{"no messages", ChatCompletions, `{"model":"m"}`, "", nil, ErrBadBody},
		{"negative id", Completions, `{"model":"m","prompt":[-1]}`, "", nil, ErrBadBody},
		{"trailing", Completions, `{"model":"m","prompt":"a"} {}`, "", nil, ErrBadBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.e, []byte(tt.body), 0)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if r.Text != tt.text || len(r.Tokens) != len(tt.tokens) {
				t.Fatalf("got text %q tokens %v, want %q %v", r.Text, r.Tokens, tt.text, tt.tokens)
			}
		})
	}
}

func TestParseLimit(t *testing.T) {
	body := `{"model":"m","prompt":"` + strings.Repeat("a", 100) + `"}`
	if _, err := Parse(Completions, []byte(body), len(body)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if _, err := Parse(Completions, []byte(body), len(body)-1); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestPromptTokens(t *testing.T) {
	for _, tt := range []struct {
		r    Request
		want uint32
	}{{Request{Text: ""}, 0}, {Request{Text: "abcd"}, 1}, {Request{Text: "abcde"}, 2}, {Request{Tokens: []uint32{1, 2}, Text: "abcdefghij"}, 2}} {
		if got := tt.r.PromptTokens(); got != tt.want {
			t.Errorf("PromptTokens(%+v) = %d, want %d", tt.r, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(uint8(2), []byte(`{"model":"m","messages":[{"role":"user","content":"U"}]}`))
	f.Add(uint8(1), []byte(`{"model":"m","prompt":[1,2]}`))
	f.Fuzz(func(t *testing.T, e uint8, data []byte) {
		// The contract every front end relies on: a Request, or an error
		// wrapping one of the three sentinels (never a panic).
		r, err := Parse(Endpoint(e%5), data, 1<<16)
		switch {
		case err == nil && r == nil:
			t.Fatal("no request and no error")
		case err != nil && !errors.Is(err, ErrBadBody) && !errors.Is(err, ErrBodyTooLarge) && !errors.Is(err, ErrUnknownEndpoint):
			t.Fatalf("error wraps no sentinel: %v", err)
		}
	})
}
