package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// argKind is what a positional argument or a flag names, for shell
// completion.
type argKind uint8

const (
	argPool       argKind = iota + 1 // a pool the sidecar knows
	argDeployment                    // a deployment of the pool (the first argument)
	argInstance                      // an instance of the pool
	argWeight                        // DEPLOYMENT=WEIGHT: completes "DEPLOYMENT="
	argPolicyKey                     // KEY=VALUE: completes "KEY="
)

// flagKinds says what the flags of each command name.
var flagKinds = map[string]map[string]argKind{
	"ramp start": {"from": argDeployment, "to": argDeployment},
	"migration":  {"from": argDeployment, "to": argDeployment},
	"pick":       {"exclude": argInstance},
}

// completeArgs is cmd's positional-argument completion: names asked of
// the sidecar at --addr within --timeout, nothing when it does not answer.
func (c *cli) completeArgs(cmd *command) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		i := len(args)
		if cmd.maxArgs >= 0 && i >= cmd.maxArgs || len(cmd.args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		kind := cmd.args[min(i, len(cmd.args)-1)]
		pool := ""
		if len(args) > 0 {
			pool = args[0]
		}
		return c.names(kind, pool, toComplete)
	}
}

// completeFlags registers the completion of the flags of cc, command
// name's leaf, that name deployments or instances.
func (c *cli) completeFlags(cc *cobra.Command, name string) {
	for flag, kind := range flagKinds[name] {
		err := cc.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return c.names(kind, args[0], toComplete)
		})
		if err != nil { // flagKinds names a flag cc lacks, or twice: a bug caught by the tests
			panic(fmt.Sprintf("prefixctl: completion of --%s on %q: %v", flag, name, err))
		}
	}
}

// names returns the completions of one kind: the sidecar's pools, or the
// pool's deployments or instances, starting with prefix.
func (c *cli) names(kind argKind, pool, prefix string) ([]string, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	if kind == argPolicyKey {
		return withPrefix(suffixed(policyKeyNames(), "="), prefix), none | cobra.ShellCompDirectiveNoSpace
	}
	admin, err := c.admin()
	if err != nil {
		return nil, none
	}
	ctx, cancel := c.call()
	defer cancel()
	var out []string
	switch kind {
	case argPool:
		r, err := admin.ListPools(ctx, &pb.ListPoolsRequest{})
		if err != nil {
			return nil, none
		}
		for _, p := range r.GetPools() {
			out = append(out, p.GetPool())
		}
	case argDeployment, argWeight:
		r, err := admin.GetWeights(ctx, &pb.GetWeightsRequest{Pool: pool})
		if err != nil {
			return nil, none
		}
		for _, d := range r.GetDeployments() {
			out = append(out, d.GetDeployment())
		}
		if kind == argWeight {
			return withPrefix(suffixed(out, "="), prefix), none | cobra.ShellCompDirectiveNoSpace
		}
	case argInstance:
		r, err := admin.ListInstances(ctx, &pb.ListInstancesRequest{Pool: pool})
		if err != nil {
			return nil, none
		}
		for _, in := range r.GetInstances() {
			out = append(out, in.GetInstanceId())
		}
	}
	return withPrefix(out, prefix), none
}

// withPrefix keeps the names starting with prefix, sorted and without
// duplicates.
func withPrefix(names []string, prefix string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func suffixed(names []string, suffix string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + suffix
	}
	return out
}

// completeCommands completes 'prefixctl help': the command and group
// names under the words given so far.
func completeCommands(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	at, _, err := cmd.Root().Find(args)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, sub := range at.Commands() {
		if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), toComplete) {
			out = append(out, sub.Name())
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
