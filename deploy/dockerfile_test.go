package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, COPY, RUN...
	args string
	line int
}

// parseDockerfile splits a Dockerfile into instructions, dropping comments
// and joining lines that end in a backslash.
func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continuation
		}
		more := strings.HasSuffix(trimmed, `\`)
		cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
		if more {
			continue
		}
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args), start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends in a continuation line", path)
	}
	return out
}

// cmdBinaries are the binaries 'make build' produces: one per directory
// of cmd/ holding package main.
func cmdBinaries(t *testing.T) []string {
	t.Helper()
	dirs, err := os.ReadDir("../cmd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join("../cmd", d.Name(), "main.go")); err == nil && strings.Contains(string(b), "\npackage main\n") {
			out = append(out, d.Name())
		}
	}
	if len(out) < 2 {
		t.Fatalf("cmd/ has %v: want prefixrouted, prefixctl and the others", out)
	}
	return out
}

// TestDockerfile: multi-stage; the final stage is a non-root distroless
// image; every binary it copies is built in the build stage from a cmd/
// directory; the data dir is a volume; the three ports are exposed.
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, "../Dockerfile")
	made := cmdBinaries(t)
	var froms, built, copied, exposed []string
	var user, volume, entrypoint string
	for _, in := range ins {
		switch in.cmd {
		case "FROM":
			froms = append(froms, in.args)
		case "RUN":
			if !strings.Contains(in.args, "go build") {
				continue
			}
			if !strings.Contains(in.args, "CGO_ENABLED=0") {
				t.Errorf("line %d: go build without CGO_ENABLED=0: the binaries would not be static", in.line)
			}
			for _, f := range strings.Fields(in.args) {
				if name, ok := strings.CutPrefix(f, "./cmd/"); ok {
					built = append(built, name)
				}
			}
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") {
				bin := filepath.Base(f[1])
				copied = append(copied, bin)
				if filepath.Base(f[2]) != bin {
					t.Errorf("line %d: %s is copied as %s", in.line, bin, f[2])
				}
			}
		case "USER":
			user = in.args
		case "VOLUME":
			volume = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "ENTRYPOINT":
			entrypoint = in.args
		}
	}
	if len(froms) < 2 || !strings.Contains(froms[len(froms)-1], "distroless/static") || !strings.Contains(froms[len(froms)-1], "nonroot") {
		t.Errorf("stages %q: want a build stage and a distroless static nonroot final stage", froms)
	}
	if len(copied) == 0 {
		t.Fatal("the final stage copies no binary")
	}
	for _, bin := range copied {
		if !slices.Contains(made, bin) {
			t.Errorf("the Dockerfile copies %q, which 'make build' does not produce (cmd/ has %v)", bin, made)
		}
		if !slices.Contains(built, bin) {
			t.Errorf("the Dockerfile copies %q but its build stage builds only %v", bin, built)
		}
	}
	if !slices.Contains(copied, "prefixrouted") {
		t.Errorf("the image lacks prefixrouted: copies %v", copied)
	}
	if user == "" || user == "0" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0:") {
		t.Errorf("USER %q: want a non-root user", user)
	}
	for _, port := range []string{"50051", "9090", "9092", "9002"} {
		if !slices.Contains(exposed, port) {
			t.Errorf("EXPOSE %v lacks %s", exposed, port)
		}
	}
	if !strings.Contains(volume, `"/var/lib/prefixroute"`) || !strings.Contains(entrypoint, `"--data-dir", "/var/lib/prefixroute"`) {
		t.Errorf("VOLUME %s / ENTRYPOINT %s: want the data dir /var/lib/prefixroute a volume", volume, entrypoint)
	}
	if !strings.Contains(entrypoint, `"--metrics-listen", "0.0.0.0:9092"`) {
		t.Errorf("ENTRYPOINT %s: want the probes and /metrics on --metrics-listen 0.0.0.0:9092, where the manifests probe", entrypoint)
	}
}
