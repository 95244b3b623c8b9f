package prefixhash

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// update rewrites the expected values in testdata/vectors.json from this
// implementation. The vectors are hand-reviewed data: after -update, review
// the diff (and check it with testdata/reference.py) before committing it.
var update = flag.Bool("update", false, "rewrite the expected hashes in testdata/vectors.json")

const vectorsPath = "testdata/vectors.json"

// listLimit is the longest hash list the file spells out; longer results are
// recorded as hash_count and last_hash.
const listLimit = 64

// hex64 is a uint64 written as a JSON string "0x" + 16 lower-case hex digits,
// since JSON numbers lose precision beyond 2^53 in many parsers.
type hex64 uint64

func (h hex64) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "0x%016x", uint64(h)), nil }

func (h *hex64) UnmarshalText(b []byte) error {
	s, ok := strings.CutPrefix(string(b), "0x")
	if !ok || len(s) != 16 {
		return fmt.Errorf("hash %q: want 0x and 16 hex digits", b)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	*h = hex64(v)
	return err
}

type vectorFile struct {
	Spec    string       `json:"spec"`
	Comment []string     `json:"comment"`
	Seeds   []seedCase   `json:"seeds"`
	Tokens  []tokensCase `json:"tokens"`
	Text    []textCase   `json:"text"`
}

type seedCase struct {
	Pool     string `json:"pool"`
	Salt     string `json:"salt"`
	Seed     hex64  `json:"seed"`
	TextSeed hex64  `json:"text_seed"`
}

// expect is the expected output of a case: the whole list when it has at
// most listLimit hashes, else its length and last element.
type expect struct {
	Hashes    *[]hex64 `json:"hashes,omitempty"`
	HashCount int      `json:"hash_count,omitempty"`
	LastHash  *hex64   `json:"last_hash,omitempty"`
}

type tokensCase struct {
	Name      string `json:"name"`
	Pool      string `json:"pool"`
	Salt      string `json:"salt"`
	BlockSize int    `json:"block_size"`
	// Tokens are the token ids; TokensIota n instead means 0, 1, ..., n-1.
	Tokens     *[]uint32 `json:"tokens,omitempty"`
	TokensIota int       `json:"tokens_iota,omitempty"`
	expect
}

type textCase struct {
	Name       string `json:"name"`
	Pool       string `json:"pool"`
	Salt       string `json:"salt"`
	ChunkBytes int    `json:"chunk_bytes"`
	Text       string `json:"text"`
	expect
}

func (c tokensCase) tokens() []uint32 {
	if c.Tokens != nil {
		return *c.Tokens
	}
	t := make([]uint32, c.TokensIota)
	for i := range t {
		t[i] = uint32(i)
	}
	return t
}

func (c tokensCase) compute() []uint64 {
	return Tokens(nil, Seed(c.Pool, c.Salt), c.BlockSize, c.tokens())
}

func (c textCase) compute() []uint64 {
	return Text(nil, Seed(c.Pool, c.Salt), c.ChunkBytes, c.Text)
}

func newExpect(got []uint64) expect {
	if len(got) > listLimit {
		last := hex64(got[len(got)-1])
		return expect{HashCount: len(got), LastHash: &last}
	}
	l := make([]hex64, len(got))
	for i, h := range got {
		l[i] = hex64(h)
	}
	return expect{Hashes: &l}
}

// check reports how got differs from e; a case must state its output.
func (e expect) check(got []uint64) error {
	if e.Hashes == nil && e.LastHash == nil {
		return fmt.Errorf("case states no expected hashes")
	}
	if e.Hashes != nil {
		want := *e.Hashes
		if len(got) != len(want) {
			return fmt.Errorf("got %d hashes, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != uint64(want[i]) {
				return fmt.Errorf("hash %d = %#016x, want %#016x", i, got[i], uint64(want[i]))
			}
		}
	}
	if e.LastHash != nil {
		if len(got) != e.HashCount {
			return fmt.Errorf("got %d hashes, want %d", len(got), e.HashCount)
		}
		if last := got[len(got)-1]; last != uint64(*e.LastHash) {
			return fmt.Errorf("last hash = %#016x, want %#016x", last, uint64(*e.LastHash))
		}
	}
	return nil
}

func loadVectors(t testing.TB) vectorFile {
	t.Helper()
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", vectorsPath, err)
	}
	return f
}

// TestVectors checks every case of testdata/vectors.json. It never writes the
// file unless -update is given.
func TestVectors(t *testing.T) {
	f := loadVectors(t)
	if *update {
		for i := range f.Seeds {
			c := &f.Seeds[i]
			c.Seed = hex64(Seed(c.Pool, c.Salt))
			c.TextSeed = hex64(textSeed(uint64(c.Seed)))
		}
		for i := range f.Tokens {
			f.Tokens[i].expect = newExpect(f.Tokens[i].compute())
		}
		for i := range f.Text {
			f.Text[i].expect = newExpect(f.Text[i].compute())
		}
		if err := os.WriteFile(vectorsPath, encodeVectors(t, f), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s: review the diff before committing it", vectorsPath)
		return
	}
	for _, c := range f.Seeds {
		if got := Seed(c.Pool, c.Salt); got != uint64(c.Seed) {
			t.Errorf("Seed(%q, %q) = %#016x, want %#016x", c.Pool, c.Salt, got, uint64(c.Seed))
		}
		if got := textSeed(uint64(c.Seed)); got != uint64(c.TextSeed) {
			t.Errorf("textSeed of Seed(%q, %q) = %#016x, want %#016x", c.Pool, c.Salt, got, uint64(c.TextSeed))
		}
	}
	for _, c := range f.Tokens {
		for _, le := range []bool{true, false} {
			withLittleEndian(t, le, func() {
				if err := c.check(c.compute()); err != nil {
					t.Errorf("tokens %q (in-place %v): %v", c.Name, le, err)
				}
			})
		}
	}
	for _, c := range f.Text {
		if err := c.check(c.compute()); err != nil {
			t.Errorf("text %q: %v", c.Name, err)
		}
	}
}

// TestVectorsCoverage keeps the vector file covering what the specification
// promises implementers it covers, so that no case is dropped unnoticed.
func TestVectorsCoverage(t *testing.T) {
	f := loadVectors(t)
	if f.Spec != "prefixroute/prefixhash/v1" {
		t.Errorf("spec = %q", f.Spec)
	}
	names := map[string]bool{}
	sizes := map[int]bool{}
	var salted, capped, emptyText, partialText, multiByte, splitRune bool
	for _, c := range f.Tokens {
		if names[c.Name] {
			t.Errorf("duplicate tokens case %q", c.Name)
		}
		names[c.Name] = true
		sizes[c.BlockSize] = true
		salted = salted || c.Salt != ""
		capped = capped || c.HashCount == MaxBlocks
	}
	for _, name := range []string{"empty", "one partial block", "exactly one block", "several blocks"} {
		if !names[name] {
			t.Errorf("no tokens case %q", name)
		}
	}
	for _, size := range []int{1, 16, 64} {
		if !sizes[size] {
			t.Errorf("no tokens case with block_size %d", size)
		}
	}
	for _, c := range f.Text {
		emptyText = emptyText || c.Text == ""
		partialText = partialText || (c.Text != "" && len(c.Text) < c.ChunkBytes)
		multiByte = multiByte || utf8.RuneCountInString(c.Text) < len(c.Text)
		for off := c.ChunkBytes; c.ChunkBytes > 0 && off < len(c.Text); off += c.ChunkBytes {
			splitRune = splitRune || !utf8.RuneStart(c.Text[off])
		}
		salted = salted || c.Salt != ""
	}
	for what, ok := range map[string]bool{
		"a salted case": salted, "a case capped at MaxBlocks": capped,
		"empty text": emptyText, "a partial text chunk": partialText,
		"multi-byte UTF-8 text": multiByte, "a chunk boundary inside a character": splitRune,
		"a seeds case": len(f.Seeds) > 0,
	} {
		if !ok {
			t.Errorf("vectors lack %s", what)
		}
	}
}

// encodeVectors writes f with one case per line, so that diffs are per case.
func encodeVectors(t testing.TB, f vectorFile) []byte {
	var b bytes.Buffer
	line := func(v any) string {
		var l bytes.Buffer
		enc := json.NewEncoder(&l)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(l.String(), "\n")
	}
	list := func(key string, n int, item func(int) any, last bool) {
		fmt.Fprintf(&b, "  %q: [\n", key)
		for i := range n {
			fmt.Fprintf(&b, "    %s%s\n", line(item(i)), map[bool]string{true: ",", false: ""}[i < n-1])
		}
		fmt.Fprintf(&b, "  ]%s\n", map[bool]string{true: "", false: ","}[last])
	}
	b.WriteString("{\n")
	fmt.Fprintf(&b, "  \"spec\": %s,\n", line(f.Spec))
	list("comment", len(f.Comment), func(i int) any { return f.Comment[i] }, false)
	list("seeds", len(f.Seeds), func(i int) any { return f.Seeds[i] }, false)
	list("tokens", len(f.Tokens), func(i int) any { return f.Tokens[i] }, false)
	list("text", len(f.Text), func(i int) any { return f.Text[i] }, true)
	b.WriteString("}\n")
	return b.Bytes()
}

// withLittleEndian runs fn with the in-place (true) or portable (false)
// token encoding; the portable one is the only one on big-endian machines.
func withLittleEndian(t testing.TB, le bool, fn func()) {
	t.Helper()
	if le && !littleEndian {
		return // the in-place view would be wrong here
	}
	saved := littleEndian
	littleEndian = le
	defer func() { littleEndian = saved }()
	fn()
}
