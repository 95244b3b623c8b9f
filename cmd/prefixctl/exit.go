package main

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/pkg/client"
)

// Exit codes. Scripts may rely on them; 'prefixctl help' and docs/prefixctl.md "Exit codes"
// document them.
const (
	exitOK          = 0 // done
	exitRefused     = 1 // the sidecar answered with an error (its gRPC code is printed)
	exitUsage       = 2 // bad command line; nothing was sent
	exitUnreachable = 3 // the sidecar could not be reached or did not answer in time
	exitConflict    = 4 // compare-and-set conflict (Aborted): re-read and retry
	exitNotReady    = 5 // migration --check: the target cannot absorb the traffic yet, or unknown
)

// exitCodesHelp is the exit-code table of the help text.
const exitCodesHelp = `Exit codes:
  0  ok
  1  the sidecar said no (the message names the gRPC code, e.g. NotFound)
  2  usage error: bad command, flag or argument; nothing was sent
  3  sidecar unreachable: connection failed, or no answer within --timeout
  4  version conflict (Aborted): weights changed since you read them;
     re-read with 'prefixctl weights get POOL' and retry
  5  migration --check: the target cannot absorb the traffic yet, or the
     verdict is unknown (too few picks or too little of the window seen)
`

// usageError is a bad command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError is an error with its own exit code and complete message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// exit prints err in one line and returns the exit code for it.
func (c *cli) exit(err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	var ee *exitError
	switch {
	case errors.As(err, &ue):
		msg := ue.msg
		if cmd := lookup(c.cmd); cmd != nil {
			msg += fmt.Sprintf(" (usage: %s)", synopsis(cmd))
		}
		c.fail(msg)
		return exitUsage
	case errors.As(err, &ee):
		c.fail(ee.msg)
		return ee.code
	}
	st, ok := grpcStatus(err)
	if !ok {
		c.fail(err.Error())
		return exitRefused
	}
	if client.Unreachable(err) {
		if st.Code() == codes.DeadlineExceeded {
			c.fail(fmt.Sprintf("sidecar at %s did not answer within %v (DeadlineExceeded); check that it runs, or raise --timeout",
				c.addr, c.timeout))
		} else {
			cause := transportCause(st.Message())
			todo := "start it ('make run') or point --addr / PREFIXCTL_ADDR at it"
			if !c.auth.usesTLS() && strings.Contains(cause, "server preface") {
				todo = "if it serves TLS, pass --tls-ca (or --tls); else " + todo
			}
			c.fail(fmt.Sprintf("sidecar at %s unreachable (%s: %s); %s", c.addr, st.Code(), cause, todo))
		}
		return exitUnreachable
	}
	msg := fmt.Sprintf("%s: %s", st.Code(), st.Message())
	hint := hintFor(c.cmd, st.Code())
	if h := c.authHint(st.Code()); h != "" {
		hint = h
	}
	if hint != "" {
		msg += " (" + hint + ")"
	}
	c.fail(msg)
	if st.Code() == codes.Aborted {
		return exitConflict
	}
	return exitRefused
}

// grpcStatus finds the gRPC status in err, however wrapped, with its own
// message.
func grpcStatus(err error) (*status.Status, bool) {
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		return gs.GRPCStatus(), true
	}
	return nil, false
}

// transportCause shortens gRPC-Go's transport message to its cause, e.g.
// "dial tcp 127.0.0.1:1: connect: connection refused".
func transportCause(msg string) string {
	if i := strings.LastIndex(msg, "desc = "); i >= 0 {
		msg = strings.Trim(msg[i+len("desc = "):], `"`)
	}
	return strings.TrimPrefix(msg, "transport: Error while dialing: ")
}

// hintFor says what to do after an error code, or "".
func hintFor(cmd string, code codes.Code) string {
	switch code {
	case codes.NotFound:
		switch {
		case cmd == "weights set" || cmd == "policy set" || cmd == "ramp start":
			return "list pools with 'prefixctl pools'; if the name is right, run 'prefixctl " + cmd + " --create' to create the pool"
		case cmd == "migration" || strings.HasPrefix(cmd, "ramp "):
			return "" // the sidecar's message says what is missing
		}
		return "list pools with 'prefixctl pools'; a pool appears when an instance reports into it or with 'prefixctl weights set --create'"
	case codes.InvalidArgument:
		if cmd != "" {
			return "see 'prefixctl help " + cmd + "'"
		}
	case codes.Aborted:
		return "re-read and retry"
	}
	return ""
}

// commandRoles is the least role each command needs of a sidecar with a
// tokens file.
var commandRoles = map[string]string{
	"pools": "operator-read", "instances": "operator-read", "weights get": "operator-read", "policy get": "operator-read",
	"weights set": "operator", "policy set": "operator",
	"ramp status": "operator-read", "migration": "operator-read", "ramp start": "operator", "ramp pause": "operator",
	"ramp resume": "operator", "ramp abort": "operator", "pick": "gateway", "instance run": "instance",
	"version": "operator-read",
}

// authHint says what to do after Unauthenticated or PermissionDenied, or "".
func (c *cli) authHint(code codes.Code) string {
	role := commandRoles[c.cmd]
	what := "a token"
	if role != "" {
		what = "a token of role " + role
	}
	switch code {
	case codes.Unauthenticated:
		if c.auth.token != "" {
			return fmt.Sprintf("the sidecar does not know the token in --token-file %s; ask for %s", c.auth.tokenFile, what)
		}
		if role == "operator" || role == "operator-read" {
			what = "an " + role + " token"
		}
		return "pass --token-file with " + what + ", or --tls-cert/--tls-key with a client certificate"
	case codes.PermissionDenied:
		if role != "" {
			return fmt.Sprintf("'prefixctl %s' needs role %s; use --token-file with a token of that role", c.cmd, role)
		}
	}
	return ""
}

// shellWord quotes s for a command hint when it is not a plain word.
func shellWord(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@+=,", r)) {
			return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
		}
	}
	return s
}
