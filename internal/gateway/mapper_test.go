package gateway

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/openai"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

func headers(kv ...string) func(string) string {
	return func(name string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == name {
				return kv[i+1]
			}
		}
		return ""
	}
}

const chat = `{"model":"llama","messages":[{"role":"system","content":"` +
	"You are a helpful assistant. Answer briefly and exactly; say when you do not know." + `"},{"role":"user","content":"hi"}]}`

func TestMap(t *testing.T) {
	chatText := "system\nYou are a helpful assistant. Answer briefly and exactly; say when you do not know.\nuser\nhi\n"
	iota := make([]uint32, 40)
	for i := range iota {
		iota[i] = uint32(i)
	}
	ids := make([]string, len(iota))
	for i, v := range iota {
		ids[i] = strconv.Itoa(int(v))
	}
	idList := "[" + strings.Join(ids, ",") + "]"
	cfg := Config{ModelPools: map[string]string{"lora-a": "llama", "m2": "poolB"}, PoolHeader: "X-Pool"}
	blockSize := func(pool string) int {
		if pool == "poolB" {
			return 8
		}
		return 0
	}
	tests := []struct {
		name    string
		cfg     *Config
		req     Request
		pool    string
		hashes  []uint64
		prompt  uint32
		reqID   string
		wantErr error
	}{
		{name: "chat: model names the pool, text mode", req: Request{Path: "/v1/chat/completions", Body: []byte(chat), Header: headers("x-request-id", "r1")},
			pool: "llama", hashes: prefixhash.Text(nil, prefixhash.Seed("llama", ""), 64, chatText), prompt: uint32((len(chatText) + 3) / 4), reqID: "r1"},
		{name: "token ids: default block size 16", req: Request{Path: "/v1/completions?x=1", Body: []byte(`{"model":"llama","prompt":` + idList + `}`)},
			pool: "llama", hashes: prefixhash.Tokens(nil, prefixhash.Seed("llama", ""), 16, iota), prompt: 40},
		{name: "token ids: the pool's block size", req: Request{Path: "/v1/completions", Body: []byte(`{"model":"m2","prompt":` + idList + `}`)},
			pool: "poolB", hashes: prefixhash.Tokens(nil, prefixhash.Seed("poolB", ""), 8, iota), prompt: 40},
		{name: "LoRA adapter maps to its base pool", req: Request{Path: "/v1/completions", Body: []byte(`{"model":"lora-a","prompt":"` + strings.Repeat("a", 130) + `"}`)},
			pool: "llama", hashes: prefixhash.Text(nil, prefixhash.Seed("llama", ""), 64, strings.Repeat("a", 130)), prompt: 33},
		{name: "pool header overrides the model", req: Request{Path: "/v1/completions", Body: []byte(`{"model":"m2","prompt":"x"}`), Header: headers("x-pool", " hdr ")},
			pool: "hdr", hashes: []uint64{}, prompt: 1},
		{name: "explicit pool wins", req: Request{Path: "/v1/completions", Pool: "explicit", Body: []byte(`{"model":"m2","prompt":"x"}`), Header: headers("x-pool", "hdr")},
			pool: "explicit", hashes: []uint64{}, prompt: 1},
		{name: "default pool", cfg: &Config{DefaultPool: "dflt", ModelPools: map[string]string{"a": "b"}}, req: Request{Path: "/v1/embeddings", Body: []byte(`{"model":"zzz","input":"x"}`)},
			pool: "dflt", hashes: []uint64{}, prompt: 1},
		{name: "max prefix blocks cuts the hashes", cfg: &Config{MaxPrefixBlocks: 2}, req: Request{Path: "/v1/completions", Body: []byte(`{"model":"llama","prompt":"` + strings.Repeat("a", 300) + `"}`)},
			pool: "llama", hashes: prefixhash.Text(nil, prefixhash.Seed("llama", ""), 64, strings.Repeat("a", 128)), prompt: 75},
		{name: "unknown endpoint", req: Request{Path: "/v1/models", Body: []byte(`{}`)}, wantErr: openai.ErrUnknownEndpoint},
		{name: "not json", req: Request{Path: "/v1/chat/completions", Body: []byte(`{"model"`)}, wantErr: openai.ErrBadBody},
		{name: "empty body", req: Request{Path: "/v1/chat/completions"}, wantErr: openai.ErrBadBody},
		{name: "too large", cfg: &Config{MaxBodyBytes: 10}, req: Request{Path: "/v1/chat/completions", Body: []byte(chat)}, wantErr: openai.ErrBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.cfg != nil {
				c = *tt.cfg
			}
			m, err := NewMapper(c, blockSize)
			if err != nil {
				t.Fatal(err)
			}
			dst := &pb.PickRequest{PrefixHashes: make([]uint64, 0, 64), ExcludeInstances: []string{"keep"}, RequestId: "old"}
			err = m.Map(tt.req, dst)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Map: err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if dst.Pool != tt.pool || !slices.Equal(dst.PrefixHashes, tt.hashes) || dst.PromptTokens != tt.prompt || dst.RequestId != tt.reqID {
				t.Fatalf("Map = pool %q hashes %x prompt %d id %q; want %q %x %d %q", dst.Pool, dst.PrefixHashes, dst.PromptTokens, dst.RequestId,
					tt.pool, tt.hashes, tt.prompt, tt.reqID)
			}
			if !slices.Equal(dst.ExcludeInstances, []string{"keep"}) {
				t.Fatalf("Map changed exclude_instances: %v", dst.ExcludeInstances)
			}
		})
	}
}

func TestMapReusesHashes(t *testing.T) {
	m, err := NewMapper(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst := &pb.PickRequest{PrefixHashes: make([]uint64, 0, 64)}
	req := Request{Path: "/v1/chat/completions", Body: []byte(chat)}
	arr := &dst.PrefixHashes[:1][0]
	if err := m.Map(req, dst); err != nil {
		t.Fatal(err)
	}
	if len(dst.PrefixHashes) == 0 || &dst.PrefixHashes[0] != arr {
		t.Fatalf("Map did not reuse dst.PrefixHashes (%d hashes)", len(dst.PrefixHashes))
	}
}

// TestSharedSystemPrompt: two chats sharing tools and a system prompt share
// their first hashes (the point of the canonical text).
func TestSharedSystemPrompt(t *testing.T) {
	m, _ := NewMapper(Config{}, nil)
	sys := strings.Repeat("You are a careful assistant. ", 10)
	body := func(user string) []byte {
		return []byte(`{"model":"p","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"system","content":"` + sys + `"},{"role":"user","content":"` + user + `"}]}`)
	}
	var a, b pb.PickRequest
	if err := m.Map(Request{Path: "/v1/chat/completions", Body: body("first question, rather long to fill a chunk or two of text")}, &a); err != nil {
		t.Fatal(err)
	}
	if err := m.Map(Request{Path: "/v1/chat/completions", Body: body("another one entirely, also long enough to fill chunks")}, &b); err != nil {
		t.Fatal(err)
	}
	shared := 0
	for shared < min(len(a.PrefixHashes), len(b.PrefixHashes)) && a.PrefixHashes[shared] == b.PrefixHashes[shared] {
		shared++
	}
	// "tools\n" + 46 bytes + "\n", "system\n", 290 bytes, "\nuser\n": 356 shared bytes, 5 full 64-byte chunks.
	if shared != 5 || len(a.PrefixHashes) != 6 {
		t.Fatalf("shared %d of %d hashes; want 5 of 6", shared, len(a.PrefixHashes))
	}
}

func TestNewMapperRejects(t *testing.T) {
	for _, c := range []Config{{MaxBodyBytes: -1}, {MaxPrefixBlocks: -1}, {ModelPools: map[string]string{"a": ""}}} {
		if _, err := NewMapper(c, nil); err == nil {
			t.Errorf("NewMapper(%+v) accepted", c)
		}
	}
}

func TestParseModelPools(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
		err  string
	}{
		{"", map[string]string{}, ""},
		{"m1=poolA,m2=poolA", map[string]string{"m1": "poolA", "m2": "poolA"}, ""},
		{" m1 = poolA , ,m2=poolB ", map[string]string{"m1": "poolA", "m2": "poolB"}, ""},
		{"# file form\nm1=poolA\n\nm2=poolB,m3=poolB\n", map[string]string{"m1": "poolA", "m2": "poolB", "m3": "poolB"}, ""},
		{"m1", nil, `line 1: "m1" is not model=pool`},
		{"m1=", nil, `line 1: "m1=" is not model=pool`},
		{"a=b\n=c", nil, `line 2: "=c" is not model=pool`},
		{"a=b,a=c", nil, `model "a" is mapped twice (to "b" and "c")`},
	}
	for _, tt := range tests {
		got, err := ParseModelPools(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseModelPools(%q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("ParseModelPools(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("ParseModelPools(%q)[%q] = %q, want %q", tt.in, k, got[k], v)
			}
		}
	}
}

// FuzzMap: every body and path answers with a PickRequest or an error that
// ErrorFor maps to a 4xx, never a panic.
func FuzzMap(f *testing.F) {
	f.Add("/v1/chat/completions", []byte(chat), "")
	f.Add("/v1/completions", []byte(`{"model":"m","prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}`), "p")
	f.Add("/v1/responses", []byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]}]}`), "")
	f.Add("/v1/embeddings", []byte(`{"model":"m","input":[[1,2],[3]]}`), "")
	f.Add("/v1/completions", []byte(`{"model":"m","prompt":[-1]}`), "")
	m, err := NewMapper(Config{MaxBodyBytes: 1 << 16, PoolHeader: "x-pool", ModelPools: map[string]string{"m": "p"}}, func(p string) int { return len(p) % 3 })
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string, body []byte, pool string) {
		var dst pb.PickRequest
		err := m.Map(Request{Path: path, Body: body, Header: headers("x-pool", pool)}, &dst)
		if err != nil {
			if e := ErrorFor(err); e.Status < 400 || e.Status >= 500 {
				t.Fatalf("Map error %v maps to %d", err, e.Status)
			}
			return
		}
		if dst.Pool == "" || len(dst.PrefixHashes) > prefixhash.MaxBlocks {
			t.Fatalf("Map = pool %q, %d hashes", dst.Pool, len(dst.PrefixHashes))
		}
	})
}

// TestTextChunksFollowBlockSize: in text mode a chunk is 4 bytes a token of
// the pool's block size, so the prompt estimate covers every chunk sent
// (the router refuses prompt_tokens below blocks × block size).
func TestTextChunksFollowBlockSize(t *testing.T) {
	text := strings.Repeat("a long shared system prompt. ", 100) // 2,900 bytes
	body := `{"model":"m","messages":[{"role":"user","content":"` + text + `"}]}`
	for _, bs := range []int{0, 16, 32, 512} {
		m, err := NewMapper(Config{}, func(string) int { return bs })
		if err != nil {
			t.Fatal(err)
		}
		var dst pb.PickRequest
		if err := m.Map(Request{Path: "/v1/chat/completions", Body: []byte(body)}, &dst); err != nil {
			t.Fatal(err)
		}
		eff := bs
		if eff == 0 {
			eff = prefixhash.DefaultBlockSize
		}
		canon := prefixhash.Text(nil, prefixhash.Seed("m", ""), 4*eff, canonicalOf(t, body))
		if !slices.Equal(dst.PrefixHashes, canon) {
			t.Errorf("block size %d: %d hashes, want the %d of %d-byte chunks", bs, len(dst.PrefixHashes), len(canon), 4*eff)
		}
		if covered := uint32(len(dst.PrefixHashes) * eff); dst.PromptTokens < covered {
			t.Errorf("block size %d: prompt_tokens %d below the %d tokens its %d hashes cover", bs, dst.PromptTokens, covered, len(dst.PrefixHashes))
		}
	}
}

// canonicalOf is the canonical text of a chat body, as openai.Parse gives it.
func canonicalOf(t *testing.T, body string) string {
	t.Helper()
	r, err := openai.Parse(openai.ChatCompletions, []byte(body), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return r.Text
}
