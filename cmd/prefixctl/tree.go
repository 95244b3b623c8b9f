package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// group is a command that only holds subcommands ("weights": get, set).
type group struct{ name, help string }

// groups lists the groups; their subcommands are the commands named
// "GROUP SUBCOMMAND".
var groups = []group{
	{"weights", "Show or replace a pool's deployment weights."},
	{"ramp", "Move a pool's weights to a target in steps the sidecar applies itself; follow, pause, resume or abort the ramp."},
	{"policy", "Show or change a pool's scheduling policy."},
	{"instance", "Stand-ins for model-server instances, for tests and demos."},
}

func lookupGroup(name string) *group {
	for i := range groups {
		if groups[i].name == name {
			return &groups[i]
		}
	}
	return nil
}

// commandName is cmd's name without "prefixctl ": "weights set", "" for
// the root.
func commandName(cmd *cobra.Command) string {
	if cmd == nil || !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// execute builds the command tree, runs the command line in it and
// returns the command's error.
func (c *cli) execute(args []string) error {
	root := c.buildTree()
	root.SetArgs(longDashes(root, args)) // never nil: cobra would read os.Args
	cmd, err := root.ExecuteC()
	if spec := lookup(commandName(cmd)); spec != nil && c.cmd == "" {
		c.cmd = spec.name // a flag error, before RunE set it
	}
	return err
}

// buildTree returns the cobra command tree of c: the global flags as the
// root's persistent flags, a group per group, a leaf per command.
func (c *cli) buildTree() *cobra.Command {
	root := &cobra.Command{
		Use:           "prefixctl",
		Short:         "prefixctl is the operator CLI of prefixroute, the routing sidecar",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noSubcommand,
		RunE:          func(*cobra.Command, []string) error { return usagef("no command given (see 'prefixctl help')") },

		SuggestionsMinimumDistance: 2,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&c.addr, "addr", c.addr, "the sidecar's gRPC address `HOST:PORT` (env PREFIXCTL_ADDR)")
	pf.StringVarP(&c.output, "output", "o", c.output, "output format: table or json")
	pf.DurationVar(&c.timeout, "timeout", c.timeout, "deadline `D` of each call")
	c.auth.register(pf)
	root.SetFlagErrorFunc(flagError)

	parents := map[string]*cobra.Command{"": root}
	for _, g := range groups {
		gc := &cobra.Command{Use: g.name + " COMMAND", Short: g.help, Args: noSubcommand, SuggestionsMinimumDistance: 2,
			RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
		root.AddCommand(gc)
		parents[g.name] = gc
	}
	for i := range commands {
		spec := &commands[i]
		parent, leaf, ok := strings.Cut(spec.name, " ")
		if !ok {
			parent, leaf = "", spec.name
		}
		cc := &cobra.Command{Use: strings.TrimSpace(leaf + " " + spec.usage), Short: firstSentence(spec.help),
			Args: cobra.ArbitraryArgs, ValidArgsFunction: c.completeArgs(spec)}
		run := spec.setup(c, cc.Flags())
		cc.RunE = func(_ *cobra.Command, args []string) error {
			c.cmd = spec.name
			if err := c.check(spec, args); err != nil {
				return err
			}
			return run(args)
		}
		c.completeFlags(cc, spec.name)
		parents[parent].AddCommand(cc)
	}
	root.SetHelpCommand(&cobra.Command{Use: "help [COMMAND]", Short: "Usage, flags and exit codes of a command",
		Args: cobra.ArbitraryArgs, ValidArgsFunction: completeCommands,
		RunE: func(_ *cobra.Command, args []string) error { return c.help(args) }})
	cobraHelp := root.HelpFunc()
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		if name := commandName(cmd); name == "" || lookup(name) != nil || lookupGroup(name) != nil {
			c.printHelp(cmd.OutOrStdout(), name)
			return
		}
		cobraHelp(cmd, args) // cobra's own commands: completion
	})
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.InitDefaultCompletionCmd()
	for _, cc := range root.Commands() {
		if cc.Name() == "completion" { // answer 'completion nosuch' like our groups
			cc.Args = noSubcommand
			cc.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	c.tree = root
	return root
}

// noSubcommand is the Args check of the root and the groups: an argument
// there is an unknown command, answered with the nearest ones.
func noSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	in := commandName(cmd)
	msg := fmt.Sprintf("unknown command %q", strings.TrimSpace(in+" "+args[0]))
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		for i := range s {
			s[i] = strconv.Quote(strings.TrimSpace(in + " " + s[i]))
		}
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef("%s (see '%s')", msg, strings.TrimSpace("prefixctl help "+in))
}

// flagError turns pflag's parse errors into usage errors, suggesting the
// nearest flag for an unknown one.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	name, unknown := strings.CutPrefix(msg, "unknown flag: --")
	if !unknown {
		return usagef("%s", msg)
	}
	msg = "unknown flag --" + name
	if near := nearestFlag(cmd.Flags(), name); near != "" {
		msg += fmt.Sprintf("; did you mean --%s?", near)
	}
	return usagef("%s", msg)
}

// nearestFlag is the flag of fs nearest to name: within an edit distance
// of 2, or name a prefix of it; "" when none is.
func nearestFlag(fs *pflag.FlagSet, name string) string {
	best, bestD := "", 3
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 2 {
			d = min(d, 1)
		}
		if d < bestD || d == bestD && f.Name < best {
			best, bestD = f.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// firstSentence is help's first sentence, for cobra's short descriptions
// (shown by zsh and fish completion).
func firstSentence(help string) string {
	if i := strings.Index(help, ". "); i >= 0 {
		return help[:i+1]
	}
	return help
}

// longDashes rewrites a long flag written with one dash ("-addr", the
// flag package's spelling, which prefixctl accepted before cobra) to two,
// so that scripts keep working. An argument is rewritten only when its name
// is a long flag of the tree, and not when it is the value of the flag
// before it or follows "--".
func longDashes(root *cobra.Command, args []string) []string {
	long := map[string]bool{} // name -> takes a value
	var visit func(*cobra.Command)
	visit = func(cmd *cobra.Command) {
		add := func(f *pflag.Flag) { long[f.Name] = f.NoOptDefVal == "" }
		cmd.LocalFlags().VisitAll(add)
		cmd.PersistentFlags().VisitAll(add)
		for _, sub := range cmd.Commands() {
			visit(sub)
		}
	}
	visit(root)
	out := make([]string, 0, len(args))
	valueNext := false
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		isValue := valueNext
		valueNext = false
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takesValue, known := long[name]
		switch {
		case isValue:
		case strings.HasPrefix(a, "--"):
			valueNext = known && takesValue && !hasValue
		case strings.HasPrefix(a, "-") && len(name) > 1 && known:
			a = "-" + a
			valueNext = takesValue && !hasValue
		case a == "-o":
			valueNext = true
		}
		out = append(out, a)
	}
	return out
}
