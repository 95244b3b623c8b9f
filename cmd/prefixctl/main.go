// Command prefixctl is the operator CLI of prefixroute: it sets deployment
// weights and scheduling policies, lists pools and instances, and asks for
// (and explains) routing decisions. See 'prefixctl help' and
// docs/prefixctl.md. The command tree is github.com/spf13/cobra's
// (tree.go); the commands are listed in main.go.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/pkg/client"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one prefixctl command line and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run with a context that ends long-running commands
// (instance run); tests cancel it instead of sending a signal.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, output: "table", timeout: 5 * time.Second, addr: client.DefaultAddr}
	if env := os.Getenv("PREFIXCTL_ADDR"); env != "" {
		c.addr = env
	}
	c.auth.fromEnv()
	defer c.close()
	return c.exit(c.execute(args))
}

// cli is one invocation: global flags, output streams and the connection.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	addr           string
	output         string
	timeout        time.Duration
	auth           authFlags

	cmd  string         // the command's name, for messages: "weights set"
	tree *cobra.Command // the command tree (tree.go); nil in render tests
	cc   *grpc.ClientConn
}

// runner runs a command with its positional arguments, after its flags
// are parsed.
type runner func(pos []string) error

// command is one subcommand.
type command struct {
	name             string // "weights set"
	usage            string // synopsis after the name
	help             string // what it does, one paragraph
	minArgs, maxArgs int    // positional arguments; maxArgs -1: no limit
	// setup registers the command's flags on fs and returns its runner.
	setup func(c *cli, fs *pflag.FlagSet) runner
	// args says what each positional argument names, for shell completion;
	// the last kind repeats when maxArgs is -1.
	args []argKind
}

// commands lists every command in help order.
var commands []command

func init() {
	commands = []command{
		{"pools", "", "List the pools the sidecar knows.", 0, 0, (*cli).pools, nil},
		{"instances", "POOL [--wait N] [--wait-timeout D]",
			"List the pool's instances. --wait N polls until N instances are ok (for scripts and CD pipelines), up to --wait-timeout (default 30s).",
			1, 1, (*cli).instances, []argKind{argPool}},
		{"weights get", "POOL", "Show the pool's deployment weights, version and shares.", 1, 1, (*cli).weightsGet, []argKind{argPool}},
		{"weights set", "POOL DEPLOYMENT=WEIGHT... [--expect-version N]",
			"Replace the pool's weights (deployments left out get 0; all 0 drains the pool). --expect-version N makes it a compare-and-set: exit 4 when the version is not N.",
			2, -1, (*cli).weightsSet, []argKind{argPool, argWeight}},
		{"ramp start", "POOL DEPLOYMENT=WEIGHT... --over D --every D | POOL --steps SPEC [--expect-version N] [--auto-hold PCT [--from A] [--to B]]",
			"Move the pool's weights to the target in steps the sidecar applies itself (durably: a restart resumes the ramp). Each step moves every deployment's share of traffic by the same amount; deployments left out go to 0. --steps gives explicit steps instead, e.g. '0s:a=9,b=1;10m:a=1,b=1;10m:a=0,b=1' (each wait counts from the step before). While a ramp runs or is paused, 'weights set' is refused. --auto-hold PCT pauses the ramp before a step that would leave the gaining deployment less than PCT % prefill headroom (see 'migration').",
			1, -1, (*cli).rampStart, []argKind{argPool, argWeight}},
		{"ramp status", "POOL", "Show the pool's last ramp: state, steps applied, when the next step is due, each step's shares.",
			1, 1, (*cli).rampStatus, []argKind{argPool}},
		{"ramp pause", "POOL [--id N]", "Stop applying steps; the wait left to the next step is kept for 'ramp resume'.",
			1, 1, (*cli).rampChange, []argKind{argPool}},
		{"ramp resume", "POOL [--id N]", "Restart a paused ramp: its next step is due after the wait it had left.",
			1, 1, (*cli).rampChange, []argKind{argPool}},
		{"ramp abort", "POOL [--id N]", "End the ramp. The weights stay those of the last applied step; 'weights set' works again.",
			1, 1, (*cli).rampChange, []argKind{argPool}},
		{"migration", "POOL --from A --to B [--top N] [--check]",
			"Can B take A's traffic now? From the picks of the last --migration-window (default 5 min): each deployment's weight, traffic and hit ratio; the prefill B would absorb if A's weight went to 0 now (A's uncached work plus the one-off recompute of what only A has cached), next to B's capacity; a verdict line; and the hottest prefixes cached only on A (their first block hash: replay those prompts to B to warm it). --check exits 5 unless B can absorb it.",
			1, 1, (*cli).migration, []argKind{argPool}},
		{"calibration", "POOL",
			"Show the prefill model each deployment learned from outcomes (served ReportOutcome with ttft_ms, matched to its pick by request_id): the prefill time's scale over the prior, the fitted doubling context, the fitted queue correction (not applied), samples, and whether picks use it (policy calibration apply, after a minimum of samples).",
			1, 1, (*cli).calibration, []argKind{argPool}},
		{"policy get", "POOL", "Show the pool's scheduling policy.", 1, 1, (*cli).policyGet, []argKind{argPool}},
		{"policy set", "POOL KEY=VALUE...",
			"Change policy fields; the others keep their value. Keys: " + strings.Join(policyKeyNames(), ", ") +
				". Ratios take a fraction or a percentage (0.1 or 10%), *_ms fields ms (20 or 20ms), stale_after and forget_after a duration (2s).",
			1, -1, (*cli).policySet, []argKind{argPool, argPolicyKey}},
		{"pick", "POOL [--tokens IDS | --text TEXT | --hashes H,...] [--prompt-tokens N] [--seed N] [--exclude ID,...] [--salt S] [--block-size N] [--slo-ms MS] [--explain] [--audit LEVEL]",
			"Ask which instance would serve a request, hashing the prompt like a gateway (pkg/client). IDS are token ids and ranges (1,2,3 or 0-63). --explain prints the audit: each deployment's share, hit ratio and probability, each instance's cost parts and probability. The sidecar returns the full audit with --explain or --audit full; else only the chosen instance's part (--audit chosen), as gateways ask. Note that a pick is real: the sidecar accounts the request's work to the chosen instance.",
			1, 1, (*cli).pick, []argKind{argPool}},
		{"hash", "POOL [--tokens IDS | --text TEXT] [--salt S] [--block-size N] [--chunk-bytes N]",
			"Print the prompt's block hashes (pkg/prefixhash: token mode with --tokens, text mode with --text), comma-separated 0x-hex, e.g. for 'instance run --stored'. With -o json: {\"pool\": ..., \"hashes\": [...]}. Needs no sidecar.",
			1, 1, (*cli).hash, []argKind{argPool}},
		{"instance run", "POOL DEPLOYMENT ID --address A [--queue-ms X] [--tps N] [--kv-usage F] [--cache-events] [--stored H,...] [--draining] [--for D]",
			"TEST/DEMO TOOL, not for production: pretend to be a model-server instance. Reports fixed load figures through pkg/client's Reporter (reconnecting like a real instance) until interrupted or for --for. --stored reports those block hashes as cached (and implies --cache-events).",
			3, 3, (*cli).instanceRun, []argKind{argPool, argDeployment, argInstance}},
		{"version", "", "Print prefixctl's version and, when the sidecar answers within --timeout, the sidecar's (version, revision, Go version, start time).",
			0, 0, (*cli).version, nil},
	}
}

// lookup returns the command with this name, or nil.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// check checks the positional arguments' count and the global flags.
func (c *cli) check(cmd *command, pos []string) error {
	switch {
	case len(pos) < cmd.minArgs:
		return usagef("missing arguments")
	case cmd.maxArgs >= 0 && len(pos) > cmd.maxArgs:
		return usagef("unexpected argument %q", pos[cmd.maxArgs])
	}
	if c.output != "table" && c.output != "json" {
		return usagef("-o %q: want table or json", c.output)
	}
	if c.timeout <= 0 {
		return usagef("--timeout %v: want a positive duration", c.timeout)
	}
	return nil
}

// conn returns the connection to the sidecar, dialling it on first use.
func (c *cli) conn() (*grpc.ClientConn, error) {
	if c.cc == nil {
		opts, err := c.auth.dialOptions(c.addr)
		if err != nil {
			return nil, err
		}
		cc, err := client.DialWith(c.addr, opts)
		if err != nil {
			return nil, usagef("--addr %q: %v", c.addr, err)
		}
		c.cc = cc
	}
	return c.cc, nil
}

// admin returns an AdminService client.
func (c *cli) admin() (pb.AdminServiceClient, error) {
	cc, err := c.conn()
	if err != nil {
		return nil, err
	}
	return pb.NewAdminServiceClient(cc), nil
}

// call returns a context with the --timeout deadline.
func (c *cli) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, c.timeout)
}

// adminCall makes one AdminService call and prints its response: protojson
// with -o json, else the table render draws.
func adminCall[R proto.Message](c *cli, do func(context.Context, pb.AdminServiceClient) (R, error), render func(io.Writer, R)) error {
	admin, err := c.admin()
	if err != nil {
		return err
	}
	ctx, cancel := c.call()
	defer cancel()
	resp, err := do(ctx, admin)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return writeJSON(c.stdout, resp)
	}
	render(c.stdout, resp)
	return nil
}

func (c *cli) close() {
	if c.cc != nil {
		c.cc.Close()
	}
}

// fail prints a one-line error: "prefixctl: CMD: MSG".
func (c *cli) fail(msg string) {
	msg = strings.Join(strings.Fields(msg), " ")
	if c.cmd != "" {
		fmt.Fprintf(c.stderr, "prefixctl: %s: %s\n", c.cmd, msg)
	} else {
		fmt.Fprintf(c.stderr, "prefixctl: %s\n", msg)
	}
}
