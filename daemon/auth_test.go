package daemon

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAuthPaths runs every RPC as every kind of caller over real loopback
// gRPC with TLS: no credentials, an unknown token, a malformed header, the
// wrong role, the right role, mTLS identities (mapped, unmapped), and bound
// instances reporting inside and outside their binding.
func TestAuthPaths(t *testing.T) {
	now := time.Now()
	e := startSecure(t, func(c *Config) { c.Server.Now = func() time.Time { return now } })
	// An instance in chat/a (never stale on the frozen clock), so that a
	// gateway's Pick succeeds.
	st := openReport(t, e.as("inst"), e.dial(""), "chat", "a", "a-1")
	defer st.CloseSend()

	const (
		OK     = codes.OK
		Unauth = codes.Unauthenticated
		Denied = codes.PermissionDenied
	)
	tests := []struct {
		who  string // identity whose token is sent; "" none; "bogus" an unknown one
		conn string // client certificate: "" none, else its name
		call string
		want codes.Code
		msg  string // part of the message
	}{
		{"", "", "Pick", Unauth, "no credentials"},
		{"", "", "ReportLoad chat/a", Unauth, "no credentials"},
		{"", "", "SetWeights", Unauth, "no credentials"},
		{"", "", "GetWeights", Unauth, "no credentials"},
		{"bogus", "", "Pick", Unauth, "not recognised"},
		{"bogus", "", "SetWeights", Unauth, "not recognised"},
		{"gw", "", "Pick", OK, ""},
		{"gw", "", "SetWeights", Denied, `identity "gw" (token) has role gateway`},
		{"gw", "", "ReportLoad chat/a", Denied, "needs role instance"},
		{"inst", "", "Pick", Denied, "needs role gateway"},
		{"gw", "", "ReportOutcome", OK, ""},
		{"inst", "", "ReportOutcome", Denied, "needs role gateway"},
		{"ops", "", "ReportOutcome", Denied, "needs role gateway"},
		{"", "", "ReportOutcome", Unauth, "no credentials"},
		{"inst", "", "ReportLoad other/a", OK, ""},
		{"inst", "", "GetWeights", Denied, "needs role operator-read"},
		{"reader", "", "GetWeights", OK, ""},
		{"reader", "", "ListPools", OK, ""},
		{"reader", "", "SetWeights", Denied, "needs role operator"},
		{"reader", "", "SetPolicy", Denied, "needs role operator"},
		{"reader", "", "AbortRamp", Denied, "needs role operator"},
		{"reader", "", "GetRamp", codes.NotFound, "never had a ramp"}, // past auth
		{"ops", "", "AbortRamp", codes.NotFound, "never had a ramp"},
		{"ops", "", "SetWeights", OK, ""},
		{"ops", "", "SetPolicy", OK, ""},
		{"ops", "", "GetWeights", OK, ""}, // operator implies operator-read
		{"ops", "", "Pick", Denied, "needs role gateway"},
		// Bound instance identities.
		{"inst-a", "", "ReportLoad chat/a", OK, ""},
		{"inst-a", "", "ReportLoad chat/b", Denied, `identity "inst-a" is bound to pool "chat" deployment "a"; this stream reports deployment "b"`},
		{"inst-a", "", "ReportLoad other/a", Denied, `bound to pool "chat" deployment "a"; this stream reports pool "other"`},
		// mTLS identities.
		{"", "alice", "SetWeights", OK, ""},
		{"", "alice", "Pick", Denied, `identity "alice" (cert) has role operator`},
		{"", "inst-b-cert", "ReportLoad chat/b", OK, ""},
		{"", "inst-b-cert", "ReportLoad chat/a", Denied, `"inst-b-cert" is bound to pool "chat" deployment "b"`},
		{"", "stranger", "GetWeights", Denied, "maps to no identity"},
		// A token, when sent, decides: a bad one fails even with a good cert.
		{"bogus", "alice", "SetWeights", Unauth, "not recognised"},
		{"gw", "alice", "SetWeights", Denied, `"gw" (token)`},
		// Health is open; reflection needs any identity.
		{"", "", "Health", OK, ""},
		{"", "", "Reflection", Unauth, "no credentials"},
		{"gw", "", "Reflection", OK, ""},
	}
	for _, tc := range tests {
		name := tc.who + "+" + tc.conn + "/" + tc.call
		t.Run(name, func(t *testing.T) {
			err := authCalls[tc.call](e.as(tc.who), e.dial(tc.conn))
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, err, tc.want)
			}
			if tc.msg != "" && !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Errorf("message %q does not contain %q", status.Convert(err).Message(), tc.msg)
			}
		})
	}
}

// TestUntrustedClientCertificate: a certificate from another CA fails the
// TLS handshake; nothing reaches a handler.
func TestUntrustedClientCertificate(t *testing.T) {
	e := startSecure(t, nil)
	err := authCalls["GetWeights"](e.as("ops"), e.dial("untrusted"))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable (handshake refused)", err)
	}
}

// TestAuditLogRecordsCaller: the audit log of weight and policy changes
// names the authenticated identity, how it was proved, and the peer.
func TestAuditLogRecordsCaller(t *testing.T) {
	e := startSecure(t, nil)
	if err := authCalls["SetWeights"](e.as("ops"), e.dial("")); err != nil {
		t.Fatal(err)
	}
	if err := authCalls["SetPolicy"](e.as(""), e.dial("alice")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(e.Dir, "data", "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // opened for reading
	var callers []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var rec struct{ Caller string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		callers = append(callers, rec.Caller)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^ops via token from 127\.0\.0\.1:\d+$`),
		regexp.MustCompile(`^alice via cert from 127\.0\.0\.1:\d+$`),
	}
	if len(callers) != len(want) {
		t.Fatalf("audit callers %q, want %d", callers, len(want))
	}
	for i, re := range want {
		if !re.MatchString(callers[i]) {
			t.Errorf("audit caller %q does not match %v", callers[i], re)
		}
	}
}
