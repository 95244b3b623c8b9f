// Package testpki makes the TLS material and tokens file of a secure-sidecar
// test in a temp dir: nothing is committed. It is shared by the tests of
// internal/auth, server, pkg/client and cmd/prefixctl, and so imports
// internal/auth only (never server).
package testpki

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/auth"
)

// PKI is the TLS material and tokens file of one secure-sidecar test, made
// in a temp dir (nothing is committed): a server CA and a server
// certificate for localhost and 127.0.0.1, a client CA and client
// certificates, and one token file per identity with a token.
//
// The tokens file's identities: with a token, gw (gateway), inst
// (instance), inst-a (instance bound to pool chat deployment a), reader
// (operator-read) and ops (operator); with a client certificate, alice
// (operator, dns:alice.ops.test) and inst-b-cert (instance bound to chat/b,
// uri:spiffe://fleet/chat/b).
type PKI struct {
	Dir        string
	CA         *CA               // issues the server certificate
	ClientCA   *CA               // issues the client certificates
	Server     Leaf              // the server certificate in TLS.CertFile
	ServerCA   string            // PEM file of the CA clients trust
	TLS        auth.TLSFiles     // the daemon's files (ReloadInterval an hour)
	AliceCert  string            // client certificate of identity alice
	AliceKey   string            //
	TokensFile string            // the daemon's --tokens-file
	TokenFile  map[string]string // identity name -> file holding its token
	Token      map[string]string // identity name -> token
	// Cert are client certificates by name: alice and inst-b-cert prove
	// those identities, stranger is from the client CA but maps to no
	// identity, untrusted names alice but is from another CA.
	Cert map[string]Leaf
}

// tokenIdentities are the tokens file's identities with a token.
var tokenIdentities = []struct{ name, roles, extra string }{
	{"gw", "[gateway]", ""},
	{"inst", "[instance]", ""},
	{"inst-a", "[instance]", "    bind: {pool: chat, deployment: a}\n"},
	{"reader", "[operator-read]", ""},
	{"ops", "[operator]", ""},
}

// certIdentities are the identities proved by a client certificate, in
// the scalar-for-a-list forms the format allows.
const certIdentities = `  - name: alice
    roles: [operator]
    cert: [dns:alice.ops.test]
  - name: inst-b-cert
    roles: instance
    cert: uri:spiffe://fleet/chat/b
    bind: {pool: chat, deployment: b}
`

// Token is the bearer token of an identity in these tests.
func Token(name string) string { return "test-token-of-" + name + "-0123456789" }

// New makes a PKI in t.TempDir().
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{Dir: dir, CA: NewCA(t, "server-ca"), ClientCA: NewCA(t, "client-ca"),
		TokenFile: map[string]string{}, Token: map[string]string{}, Cert: map[string]Leaf{}}
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		WriteFile(t, path, b)
		return path
	}
	p.ServerCA = write("ca.pem", p.CA.PEM)
	p.Server = p.CA.ServerLeaf(t)
	p.TLS = auth.TLSFiles{CertFile: write("server.pem", p.Server.CertPEM), KeyFile: write("server-key.pem", p.Server.KeyPEM),
		ClientCAFile: write("client-ca.pem", p.ClientCA.PEM), ReloadInterval: time.Hour}
	p.Cert["alice"] = p.ClientCA.Issue(t, Spec{CN: "Alice", DNS: []string{"alice.ops.test"}})
	p.Cert["inst-b-cert"] = p.ClientCA.Issue(t, Spec{CN: "chat-b-7", URIs: []string{"spiffe://fleet/chat/b"}})
	p.Cert["stranger"] = p.ClientCA.Issue(t, Spec{CN: "stranger", DNS: []string{"stranger.test"}})
	p.Cert["untrusted"] = NewCA(t, "other-ca").Issue(t, Spec{CN: "alice", DNS: []string{"alice.ops.test"}})
	p.AliceCert, p.AliceKey = write("alice.pem", p.Cert["alice"].CertPEM), write("alice-key.pem", p.Cert["alice"].KeyPEM)

	var b strings.Builder
	b.WriteString("# identities of the secure-sidecar tests\nidentities:\n")
	for _, e := range tokenIdentities {
		tok := Token(e.name)
		p.Token[e.name] = tok
		p.TokenFile[e.name] = write(e.name+".token", []byte(tok+"\n"))
		fmt.Fprintf(&b, "  - name: %s\n    roles: %s\n    token_sha256: %s\n%s", e.name, e.roles, auth.HashToken(tok), e.extra)
	}
	b.WriteString(certIdentities)
	p.TokensFile = write("tokens.yaml", []byte(b.String()))
	return p
}

// Files are the daemon configuration's security files: the tokens file
// and, with withTLS, the TLS files with the client CA (zero without). Set
// them as cfg.TokensFile, cfg.TLS = pki.Files(withTLS).
func (p *PKI) Files(withTLS bool) (tokensFile string, tls auth.TLSFiles) {
	if withTLS {
		tls = p.TLS
	}
	return p.TokensFile, tls
}
