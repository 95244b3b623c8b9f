//go:build unix

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHashToken: hash-token prints the SHA-256 hex of the token on stdin
// (trailing newline ignored), refuses short tokens, and -generate prints a
// fresh token with its matching hash.
func TestHashToken(t *testing.T) {
	tok := "s3cret-token-for-the-gateway"
	sum := sha256.Sum256([]byte(tok))
	tests := []struct {
		args       []string
		stdin      string
		code       int
		out, noise string
	}{
		{nil, tok + "\n", 0, hex.EncodeToString(sum[:]) + "\n", ""},
		{nil, tok, 0, hex.EncodeToString(sum[:]) + "\n", ""},
		{nil, "short\n", 2, "", "at least 16 characters"},
		{[]string{"extra"}, "", 2, "", "usage:"},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		if code := hashToken(tc.args, strings.NewReader(tc.stdin), &out, &errb); code != tc.code || out.String() != tc.out ||
			!strings.Contains(errb.String(), tc.noise) {
			t.Errorf("hash-token %v <%q: exit %d out %q err %q", tc.args, tc.stdin, code, out.String(), errb.String())
		}
	}
	var out bytes.Buffer
	if code := hashToken([]string{"-generate"}, nil, &out, &out); code != 0 {
		t.Fatalf("-generate: exit %d: %s", code, out.String())
	}
	var token, hash string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "token":
			token = v
		case "token_sha256":
			hash = v
		}
	}
	if s := sha256.Sum256([]byte(token)); len(token) < 40 || hash != hex.EncodeToString(s[:]) {
		t.Errorf("-generate printed token %q hash %q", token, hash)
	}
}

// TestRefusesExposedListener: without --tokens-file a non-loopback
// --listen stops the daemon at once with one line saying why.
func TestRefusesExposedListener(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "prefixrouted")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--listen", "0.0.0.0:0", "--http-listen", "off"}, {"--listen", "127.0.0.1:0", "--http-listen", ":0"}} {
		out, err := exec.Command(bin, append(args, "--data-dir", filepath.Join(dir, "data"))...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("%v: exit %v: %s", args, err, out)
		}
		if s := strings.TrimSpace(string(out)); strings.Count(s, "\n") != 0 || !strings.Contains(s, "refusing") || !strings.Contains(s, "--insecure") {
			t.Errorf("%v: want one line naming the refusal and --insecure, got %q", args, s)
		}
	}
}
