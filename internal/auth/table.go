package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
)

// HashToken returns the lowercase hex SHA-256 of a bearer token: what the
// tokens file stores instead of the token. Safe for concurrent use.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// table is a loaded tokens file. Immutable; safe for concurrent use.
type table struct {
	identities []*Principal
	tokens     map[[32]byte]tokenEntry
	certs      map[string]*Principal // by certificate name ("dns:x.example")
}

type tokenEntry struct {
	hash [32]byte
	p    *Principal
}

// byToken returns the principal whose token hash is the token's, or nil.
// The map is keyed by the SHA-256 of the secret, which a caller cannot
// steer, so the lookup leaks nothing useful; the hit is confirmed in
// constant time.
func (t *table) byToken(token string) *Principal {
	sum := sha256.Sum256([]byte(token))
	e, ok := t.tokens[sum]
	if !ok || subtle.ConstantTimeCompare(e.hash[:], sum[:]) != 1 {
		return nil
	}
	return e.p
}

// byCert returns the one principal a verified client certificate proves: its
// SANs and its subject CN are looked up; none or two identities is an error.
func (t *table) byCert(c *x509.Certificate) (*Principal, error) {
	keys := make([]string, 0, len(c.DNSNames)+len(c.URIs)+len(c.EmailAddresses)+len(c.IPAddresses)+1)
	for _, n := range c.DNSNames {
		keys = append(keys, "dns:"+strings.ToLower(n))
	}
	for _, u := range c.URIs {
		keys = append(keys, "uri:"+u.String())
	}
	for _, e := range c.EmailAddresses {
		keys = append(keys, "email:"+e)
	}
	for _, ip := range c.IPAddresses {
		keys = append(keys, "ip:"+ip.String())
	}
	if c.Subject.CommonName != "" {
		keys = append(keys, "cn:"+c.Subject.CommonName)
	}
	var found *Principal
	for _, k := range keys {
		switch id := t.certs[k]; {
		case id == nil || id == found:
		case found != nil:
			return nil, fmt.Errorf("client certificate proves two identities, %q and %q; give each certificate one", found.Name, id.Name)
		default:
			found = id
		}
	}
	if found == nil {
		return nil, fmt.Errorf("client certificate [%s] is trusted but maps to no identity of the tokens file", strings.Join(keys, " "))
	}
	return found, nil
}
