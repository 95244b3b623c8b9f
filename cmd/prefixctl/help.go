package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

const helpIntro = `prefixctl is the operator CLI of prefixroute, the routing sidecar.

Usage:
  prefixctl [--addr HOST:PORT] [-o table|json] [--timeout D]
      [--token-file PATH] [--tls-ca PATH] [--tls-cert PATH --tls-key PATH]
      COMMAND [ARGS]

Commands:
`

const helpGlobals = `Global flags (before or after the command):
  --addr HOST:PORT  the sidecar's gRPC address
                    (default 127.0.0.1:50051, or the env PREFIXCTL_ADDR)
  -o table|json     output format; json is the response in protojson
                    (proto field names, every field, 64-bit numbers as strings)
  --timeout D       deadline of each call (default 5s)

Authentication (a sidecar with --tokens-file / --tls-cert, see SECURITY.md):
  --token-file PATH the bearer token is the file's first line (env
                    PREFIXCTL_TOKEN_FILE). There is no --token flag: a secret
                    in the command line is visible in ps and shell history.
                    Needs TLS unless --addr is loopback or a unix socket.
                    Roles: operator-read for pools, instances, weights get,
                    policy get, ramp status, migration, version (the
                    sidecar's part); operator for weights set, policy set,
                    ramp start|pause|resume|abort; gateway for pick;
                    instance for instance run.
  --tls             use TLS, trusting the system roots (implied by --tls-*)
  --tls-ca PATH     PEM CA that signed the sidecar's certificate
                    (env PREFIXCTL_TLS_CA)
  --tls-cert PATH   PEM client certificate for mutual TLS, with --tls-key
                    (env PREFIXCTL_TLS_CERT, PREFIXCTL_TLS_KEY)
  --tls-key PATH    PEM private key of --tls-cert
  --tls-server-name NAME
                    name the sidecar's certificate must carry, when not the
                    host of --addr (env PREFIXCTL_TLS_SERVER_NAME)

`

// printHelp writes the help of one command or group, or of all when name
// is "".
func (c *cli) printHelp(w io.Writer, name string) {
	if g := lookupGroup(name); g != nil {
		c.printGroupHelp(w, g)
		return
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprint(w, helpIntro)
		for i := range commands {
			fmt.Fprintln(w, "  "+wrap(synopsis(&commands[i]), 76, "      "))
		}
		fmt.Fprint(w, "  prefixctl completion bash|zsh|fish|powershell\n  prefixctl help [COMMAND]\n\n",
			"Run 'prefixctl help COMMAND' for what a command does.\n\n", helpGlobals, exitCodesHelp)
		return
	}
	fmt.Fprintf(w, "Usage:\n  %s\n\n%s\n\n", wrap(synopsis(cmd), 76, "      "), wrap(cmd.help, 78, ""))
	if flags := c.commandFlags(name); flags != "" {
		fmt.Fprintf(w, "Flags:\n%s\n", flags)
	}
	fmt.Fprint(w, helpGlobals, exitCodesHelp)
}

// printGroupHelp writes a group's help: what it is for and its commands.
func (c *cli) printGroupHelp(w io.Writer, g *group) {
	fmt.Fprintf(w, "Usage:\n  prefixctl %s COMMAND [ARGS]\n\n%s\n\nCommands:\n", g.name, wrap(g.help, 78, ""))
	for i := range commands {
		if strings.HasPrefix(commands[i].name, g.name+" ") {
			fmt.Fprintln(w, "  "+wrap(synopsis(&commands[i]), 76, "      "))
		}
	}
	fmt.Fprintf(w, "\nRun 'prefixctl help %s COMMAND' for what a command does, 'prefixctl help' for\nthe global flags and the exit codes.\n", g.name)
}

// commandFlags lists the command's own flags (not the global ones), one a
// line, or "" when it has none or the tree is not built.
func (c *cli) commandFlags(name string) string {
	if c.tree == nil {
		return ""
	}
	cc, _, err := c.tree.Find(strings.Fields(name))
	if err != nil || cc == nil {
		return ""
	}
	var b strings.Builder
	cc.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Hidden {
			return
		}
		arg, usage := pflag.UnquoteUsage(f)
		line := "--" + f.Name
		if arg != "" && f.Value.Type() != "bool" {
			line += " " + arg
		}
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" && f.DefValue != "-1" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(&b, "  %-22s %s\n", line, wrap(usage, 53, strings.Repeat(" ", 25)))
	})
	return b.String()
}

func synopsis(cmd *command) string {
	if cmd.usage == "" {
		return "prefixctl " + cmd.name
	}
	return "prefixctl " + cmd.name + " " + cmd.usage
}

// help is the help command: 'prefixctl help [COMMAND]'.
func (c *cli) help(args []string) error {
	name := strings.Join(args, " ")
	if name != "" && lookup(name) == nil && lookupGroup(name) == nil {
		if cc, _, err := c.tree.Find(args); err == nil && cc != c.tree && commandName(cc) == name {
			return cc.Help() // cobra's own commands: completion
		}
		return usagef("help: unknown command %q (see 'prefixctl help')", name)
	}
	c.printHelp(c.stdout, name)
	return nil
}

// wrap breaks s into lines of at most width columns, continuing with
// indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	col := 0
	for i, word := range words(s) {
		switch {
		case i == 0:
		case col+1+len(word) > width:
			b.WriteString("\n" + indent)
			col = len(indent)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}

// words splits s at spaces, keeping a bracketed group such as "[--tps N]"
// in one piece.
func words(s string) []string {
	var out []string
	depth := 0
	for _, f := range strings.Fields(s) {
		if depth > 0 {
			out[len(out)-1] += " " + f
		} else {
			out = append(out, f)
		}
		depth += strings.Count(f, "[") - strings.Count(f, "]")
		depth = max(depth, 0)
	}
	return out
}
