package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExtprocFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "models")
	if err := os.WriteFile(file, []byte("# adapters\nlora-a=llama\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"--extproc-listen", "127.0.0.1:9002", "--extproc-models", "m=p", "--extproc-models-file", file, "--extproc-tls", "self-signed"}, ""},
		{[]string{"--extproc-tls", "on"}, `--extproc-tls: "on" is not daemon, plaintext or self-signed`},
		{[]string{"--extproc-models", "m"}, `--extproc-models: model pools: line 1: "m" is not model=pool`},
		{[]string{"--extproc-models-file", file + ".missing"}, "--extproc-models-file: open"},
		{[]string{"--extproc-body-mode", "streamed"}, `--extproc-body-mode: "streamed" is not full-duplex-streamed or buffered`},
		{[]string{"--extproc-fallbacks", "-1"}, "--extproc-fallbacks: -1; want >= 0"},
		{[]string{"--extproc-max-body-bytes", "0"}, "--extproc-max-body-bytes: 0; want > 0"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := newExtprocFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		fe, err := f.frontEnd()
		if tt.err == "" {
			if err != nil || fe.Listen != "127.0.0.1:9002" || fe.Name != "extproc" || fe.Register == nil {
				t.Errorf("%v: %+v, %v", tt.args, fe, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%v: err %v, want %q", tt.args, err, tt.err)
		}
	}
}

// TestExtprocFlagsGateway: the mapping flags give the gateway.Config that
// POST /v1/route shares with the ext_proc front end.
func TestExtprocFlagsGateway(t *testing.T) {
	file := filepath.Join(t.TempDir(), "models")
	if err := os.WriteFile(file, []byte("lora-a=llama\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f := newExtprocFlags(fs)
	if err := fs.Parse([]string{"--extproc-models", "m=p", "--extproc-models-file", file, "--extproc-default-pool", "d",
		"--extproc-pool-header", "X-Pool", "--extproc-max-body-bytes", "1024"}); err != nil {
		t.Fatal(err)
	}
	gc, err := f.gateway()
	if err != nil || len(gc.ModelPools) != 2 || gc.ModelPools["m"] != "p" || gc.ModelPools["lora-a"] != "llama" ||
		gc.DefaultPool != "d" || gc.PoolHeader != "X-Pool" || gc.MaxBodyBytes != 1024 {
		t.Fatalf("%+v, %v", gc, err)
	}
}
