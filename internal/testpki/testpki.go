// Package testpki makes the TLS material and tokens file of a secure-sidecar
// test in a temp dir: nothing is committed. It is shared by the tests of
// pkg/client and cmd/prefixctl.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/server"
)

// PKI is the TLS material and tokens file of one secure-sidecar test,
// made in a temp dir (nothing is committed): a server CA and a server
// certificate for localhost and 127.0.0.1, a client CA and a client
// certificate (dns:alice.ops.test), and one token file per identity.
type PKI struct {
	Dir        string
	ServerCA   string            // PEM file of the CA clients trust
	TLS        server.TLSFiles   // the daemon's files
	AliceCert  string            // client certificate of identity alice
	AliceKey   string            //
	TokensFile string            // the daemon's --tokens-file
	TokenFile  map[string]string // identity name -> file holding its token
	Token      map[string]string // identity name -> token
}

var pkiSerial atomic.Int64

// testIdentities are the tokens file's identities with a token.
var testIdentities = []struct{ name, roles, extra string }{
	{"gw", "[gateway]", ""},
	{"inst-a", "[instance]", "    bind: {pool: chat, deployment: a}\n"},
	{"reader", "[operator-read]", ""},
	{"ops", "[operator]", ""},
}

// New makes a PKI in t.TempDir().
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{Dir: dir, TokenFile: map[string]string{}, Token: map[string]string{}}
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	srvCA, srvCAKey, srvCAPEM := testCA(t, "server-ca")
	cliCA, cliCAKey, cliCAPEM := testCA(t, "client-ca")
	p.ServerCA = write("ca.pem", srvCAPEM)
	c, k := testLeaf(t, srvCA, srvCAKey, "prefixrouted", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, true)
	p.TLS = server.TLSFiles{CertFile: write("server.pem", c), KeyFile: write("server-key.pem", k),
		ClientCAFile: write("client-ca.pem", cliCAPEM), ReloadInterval: time.Hour}
	c, k = testLeaf(t, cliCA, cliCAKey, "Alice", []string{"alice.ops.test"}, nil, false)
	p.AliceCert, p.AliceKey = write("alice.pem", c), write("alice-key.pem", k)

	var b strings.Builder
	b.WriteString("identities:\n")
	for _, e := range testIdentities {
		tok := "test-token-of-" + e.name + "-0123456789"
		p.Token[e.name] = tok
		p.TokenFile[e.name] = write(e.name+".token", []byte(tok+"\n"))
		fmt.Fprintf(&b, "  - name: %s\n    roles: %s\n    token_sha256: %s\n%s", e.name, e.roles, server.HashToken(tok), e.extra)
	}
	b.WriteString("  - name: alice\n    roles: [operator]\n    cert: [dns:alice.ops.test]\n")
	p.TokensFile = write("tokens.yaml", []byte(b.String()))
	return p
}

func testCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(pkiSerial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// testLeaf issues a certificate and returns it and its key in PEM.
func testLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, dns []string, ips []net.IP,
	serverAuth bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usage := x509.ExtKeyUsageClientAuth
	if serverAuth {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(pkiSerial.Add(1)), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: dns, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// Secure is a DaemonConfig option: the tokens file and, with withTLS, TLS
// with the client CA.
func (p *PKI) Secure(withTLS bool) func(*server.DaemonConfig) {
	return func(c *server.DaemonConfig) {
		c.TokensFile = p.TokensFile
		if withTLS {
			c.TLS = p.TLS
		}
	}
}
