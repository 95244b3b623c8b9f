package auth

import (
	"context"
	"strings"
	"testing"
)

func TestParseFlowBinding(t *testing.T) {
	h1, h2 := HashToken("token-number-one-xxxx"), HashToken("token-number-two-xxxx")
	tab, err := parseTokens([]byte(`
identities:
  - {name: batch, roles: gateway, token_sha256: ` + h1 + `, flow: {flow_id: tenant-b, max_priority: -1}}
  - {name: chat, roles: [gateway, operator-read], token_sha256: ` + h2 + `, flow: {max_priority: 2147483647}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if b := tab.byToken("token-number-one-xxxx").Flow; b == nil || *b != (FlowBinding{FlowID: "tenant-b", MaxPriority: -1, HasMaxPriority: true}) {
		t.Errorf("batch: %+v", b)
	}
	if b := tab.byToken("token-number-two-xxxx").Flow; b == nil || *b != (FlowBinding{MaxPriority: 1<<31 - 1, HasMaxPriority: true}) {
		t.Errorf("chat: %+v", b)
	}
	bad := []struct{ name, flow, roles, want string }{
		{"not a gateway", "{flow_id: a}", "instance", "only for identities with role gateway"},
		{"empty", "{}", "gateway", "flow needs flow_id or max_priority"},
		{"priority over int32", "{max_priority: 2147483648}", "gateway", "outside [-2147483648, 2147483647]"},
		{"priority under int32", "{max_priority: -2147483649}", "gateway", "outside"},
		{"flow id of 129 bytes", "{flow_id: " + strings.Repeat("f", 129) + "}", "gateway", "129 bytes; at most 128"},
		{"unknown key", "{priority: 3}", "gateway", "field priority not found"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTokens([]byte("identities:\n  - {name: x, roles: " + tc.roles + ", token_sha256: " + h1 + ", flow: " + tc.flow + "}\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// 128 bytes is the edge: accepted.
	if _, err := parseTokens([]byte("identities:\n  - {name: x, roles: gateway, token_sha256: " + h1 + ", flow: {flow_id: " + strings.Repeat("f", 128) + "}}\n")); err != nil {
		t.Errorf("a flow_id of 128 bytes: %v", err)
	}
}

// A bound client cannot promote itself or pose as another flow; lower
// priorities stand; an unbound or unauthenticated caller is unchanged.
func TestBindFlow(t *testing.T) {
	bound := &Principal{Name: "batch", Roles: RoleGateway, Flow: &FlowBinding{FlowID: "tenant-b", MaxPriority: 1, HasMaxPriority: true}}
	onlyFlow := &Principal{Name: "f", Roles: RoleGateway, Flow: &FlowBinding{FlowID: "tenant-f"}}
	free := &Principal{Name: "free", Roles: RoleGateway}
	with := func(p *Principal) context.Context {
		return context.WithValue(context.Background(), callerKey{}, &Caller{Principal: p, Via: "token"})
	}
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		prio     int32
		flow     string
		wantPrio int32
		wantFlow string
	}{
		{"asks more than its max", with(bound), 10, "tenant-a", 1, "tenant-b"},
		{"asks exactly its max", with(bound), 1, "", 1, "tenant-b"},
		{"asks less (sheddable)", with(bound), -5, "x", -5, "tenant-b"},
		{"flow only: priority stands", with(onlyFlow), 100, "x", 100, "tenant-f"},
		{"no binding", with(free), 7, "mine", 7, "mine"},
		{"no caller", context.Background(), 7, "mine", 7, "mine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, f := BindFlow(tc.ctx, tc.prio, tc.flow)
			if p != tc.wantPrio || f != tc.wantFlow {
				t.Errorf("BindFlow(%d, %q) = %d, %q; want %d, %q", tc.prio, tc.flow, p, f, tc.wantPrio, tc.wantFlow)
			}
		})
	}
}
