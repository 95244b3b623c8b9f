package frontend_test

import (
	"os/exec"
	"strings"
	"testing"
)

// module is the import path prefix of this repository's packages.
const module = "github.com/prefixroute/prefixroute/"

// goListDeps returns the packages pattern depends on, itself included, as
// `go list -deps` prints them (the go command the test runs under).
func goListDeps(t *testing.T, pattern string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pattern).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pattern, err, msg)
	}
	return strings.Fields(string(out))
}

// TestDependencyRules holds the layering of the repository (README,
// "Layout"): front ends import frontend, never the gRPC layer or the
// daemon; the gRPC layer imports neither the daemon nor a front end; the
// report engine (internal/report) imports none of the three;
// server/ has no package below it; prefixsim is virtual time only
// (neither the daemon nor NATS).
func TestDependencyRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	for _, rule := range []struct {
		pattern   string
		forbidden []string // a package and those below it; with a trailing "/", only those below it
	}{
		{"../frontend/...", []string{module + "server", module + "daemon"}},
		{"../server", []string{module + "daemon", module + "frontend/"}},
		// The report engine knows the router only through report.Host.
		{"../internal/report", []string{module + "server", module + "daemon", module + "frontend"}},
		// The outcome book, the fits and the waiting room are the router's
		// parts, below the gRPC layer.
		{"../internal/pickbook", []string{module + "server", module + "daemon", module + "frontend"}},
		{"../internal/calib", []string{module + "server", module + "daemon", module + "frontend"}},
		{"../internal/flowq", []string{module + "server", module + "daemon", module + "frontend"}},
		{"../cmd/prefixsim", []string{module + "server", module + "daemon", module + "internal/replica",
			module + "internal/cluster", module + "internal/simlive", "github.com/nats-io"}},
	} {
		for _, dep := range goListDeps(t, rule.pattern) {
			for _, f := range rule.forbidden {
				if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
					t.Errorf("%s depends on %s; the layout forbids %s*", rule.pattern, dep, f)
				}
			}
		}
	}
	out, err := exec.Command("go", "list", "../server/...").Output()
	if err != nil {
		t.Fatalf("go list ../server/...: %v", err)
	}
	if pkgs := strings.Fields(string(out)); len(pkgs) != 1 || pkgs[0] != module+"server" {
		t.Errorf("server/ holds packages %v; only the gRPC layer itself belongs there", pkgs)
	}
}
