package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/buildinfo"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// TestCommandTree: every group answers a bare invocation, --help and
// 'help GROUP' with its subcommands; 'help X Y' reaches the leaf; unknown
// commands and flags get the nearest suggested.
func TestCommandTree(t *testing.T) {
	dead := deadAddr(t)
	for _, g := range groups {
		var subs []string
		for i := range commands {
			if strings.HasPrefix(commands[i].name, g.name+" ") {
				subs = append(subs, "prefixctl "+commands[i].name)
			}
		}
		if len(subs) == 0 {
			t.Fatalf("group %q has no subcommand", g.name)
		}
		for _, args := range [][]string{{g.name}, {g.name, "--help"}, {g.name, "-h"}, {"help", g.name}} {
			r := ctl(dead, args...)
			expect(t, r, 0, append([]string{"prefixctl " + g.name + " COMMAND"}, subs...)...)
		}
	}
	for i := range commands {
		name := commands[i].name
		expect(t, ctl(dead, append([]string{"help"}, strings.Fields(name)...)...), 0, "Usage:\n  "+wrap(synopsis(&commands[i]), 76, "      "), "Exit codes:")
		expect(t, ctl(dead, append(strings.Fields(name), "--help")...), 0, "Usage:\n  "+wrap(synopsis(&commands[i]), 76, "      "))
	}
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		parts []string
	}{
		{"near command", []string{"weight", "get", "m"}, exitUsage, []string{`unknown command "weight"; did you mean "weights"?`}},
		{"near subcommand", []string{"ramp", "stauts", "m"}, exitUsage,
			[]string{`unknown command "ramp stauts"; did you mean "ramp start" or "ramp status"?`, "see 'prefixctl help ramp'"}},
		{"far command", []string{"zzzzzz"}, exitUsage, []string{`unknown command "zzzzzz" (see 'prefixctl help')`}},
		{"near flag", []string{"instances", "m", "--wiat", "2"}, exitUsage,
			[]string{"prefixctl: instances: unknown flag --wiat; did you mean --wait?", "(usage: prefixctl instances POOL"}},
		{"near global flag", []string{"pools", "--adr", "x"}, exitUsage, []string{"unknown flag --adr; did you mean --addr?"}},
		{"bad value", []string{"weights", "set", "m", "A=1", "--expect-version", "x"}, exitUsage,
			[]string{`invalid argument "x" for "--expect-version"`}},
		{"bad audit", []string{"pick", "m", "--audit", "most"}, exitUsage, []string{`--audit "most": want chosen, full or none`}},
		{"one-dash long flags", []string{"-timeout", "200ms", "pools", "-output", "yaml"}, exitUsage, []string{`-o "yaml": want table or json`}},
		{"one-dash value", []string{"pick", "m", "-text", "-explain", "-audit=most"}, exitUsage, []string{`--audit "most"`}},
		{"completion", []string{"completion", "bash"}, 0, []string{"bash completion V2 for prefixctl"}},
		{"completion zsh", []string{"completion", "zsh"}, 0, []string{"#compdef prefixctl"}},
		{"completion fish", []string{"completion", "fish"}, 0, []string{"complete -c prefixctl"}},
		{"completion powershell", []string{"completion", "powershell"}, 0, []string{"Register-ArgumentCompleter"}},
		{"completion unknown", []string{"completion", "tcsh"}, exitUsage, []string{`unknown command "completion tcsh"`}},
		{"help completion", []string{"help", "completion"}, 0, []string{"bash", "zsh", "fish", "powershell"}},
	} {
		t.Run(tc.name, func(t *testing.T) { expect(t, ctl(dead, tc.args...), tc.code, tc.parts...) })
	}
}

// TestCompletion asks a real sidecar for pool, deployment and instance
// names the way the shell scripts do (the hidden __complete command), and
// a dead one for nothing, quietly.
func TestCompletion(t *testing.T) {
	d := startDaemon(t, true)
	addr := d.Addr()
	report(t, addr, client.ReporterOptions{Pool: "chat", Deployment: "llama-a", InstanceID: "a-1", Address: "10.0.0.1:8000"},
		client.Load{PrefillTokensPerSecond: 1000})
	report(t, addr, client.ReporterOptions{Pool: "chat", Deployment: "llama-b", InstanceID: "b-1", Address: "10.0.0.2:8000"},
		client.Load{PrefillTokensPerSecond: 1000})
	expect(t, ctl(addr, "instances", "chat", "--wait", "2", "--wait-timeout", "20s"), 0, "2 ok")

	for _, tc := range []struct {
		name string
		args []string
		want []string // completions, in order
	}{
		{"pool", []string{"weights", "get", ""}, []string{"chat"}},
		{"pool prefix", []string{"migration", "ch"}, []string{"chat"}},
		{"pool no match", []string{"pick", "x"}, nil},
		{"weights", []string{"weights", "set", "chat", "llama-a=1", ""}, []string{"llama-a=", "llama-b="}},
		{"deployment flag", []string{"migration", "chat", "--from", "llama-"}, []string{"llama-a", "llama-b"}},
		{"instance", []string{"instance", "run", "chat", "llama-a", ""}, []string{"a-1", "b-1"}},
		{"exclude", []string{"pick", "chat", "--exclude", "b"}, []string{"b-1"}},
		{"policy key", []string{"policy", "set", "chat", "stale"}, []string{"stale_after="}},
		{"no more args", []string{"weights", "get", "chat", ""}, nil},
		{"help", []string{"help", "ra"}, []string{"ramp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ctl(addr, append([]string{"__complete"}, tc.args...)...)
			if got := completions(t, r); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("completions %q, want %q\n%v", got, tc.want, r)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		start := time.Now()
		r := ctl(silentAddr(t), "--timeout", "300ms", "__complete", "weights", "get", "")
		if got := completions(t, r); len(got) != 0 || strings.Contains(r.stderr, "prefixctl:") {
			t.Fatalf("want no completion and no error, got %q\n%v", got, r)
		}
		if waited := time.Since(start); waited > 5*time.Second {
			t.Fatalf("completion against a silent sidecar took %v with --timeout 300ms", waited)
		}
	})
}

// completions parses __complete's output: one completion a line, then
// ":DIRECTIVE".
func completions(t *testing.T, r result) []string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("__complete failed: %v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("no directive line: %v", r)
	}
	var out []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t") // drop a description
		out = append(out, name)
	}
	return out
}

// TestVersion: the client's build always, the sidecar's when it answers.
func TestVersion(t *testing.T) {
	local := buildinfo.Read()
	d := startDaemon(t, false)
	expect(t, ctl(d.Addr(), "version"), 0, "prefixctl "+local.String()+"\n",
		"sidecar at "+d.Addr()+": prefixrouted "+local.String()+", started 20")

	var out struct {
		Client struct {
			Version string `json:"version"`
		} `json:"client"`
		Server *struct {
			Version   string `json:"version"`
			GoVersion string `json:"go_version"`
			StartTime string `json:"start_time"`
		} `json:"server"`
		ServerError string `json:"server_error"`
	}
	r := ctl(d.Addr(), "version", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
		t.Fatalf("version -o json: %v\n%v", err, r)
	}
	if out.Client.Version != local.Version || out.Server == nil || out.Server.Version != local.Version ||
		out.Server.GoVersion != local.GoVersion || out.Server.StartTime == "" || out.ServerError != "" {
		t.Fatalf("version -o json: %+v\n%v", out, r)
	}

	dead := deadAddr(t)
	expect(t, ctl(dead, "version"), 0, "prefixctl "+local.String(), "sidecar at "+dead+": unreachable within 5s (Unavailable)")
	if r := ctl(dead, "version", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"server_error": "unreachable`) {
		t.Fatalf("version -o json, unreachable: %v", r)
	}
}
