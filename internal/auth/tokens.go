package auth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// tokensFile is the --tokens-file format (YAML; JSON is YAML too), which
// the package doc specifies.
type tokensFile struct {
	Identities []identityEntry `yaml:"identities"`
}

type identityEntry struct {
	// Name is what logs and the audit log call the identity.
	Name string `yaml:"name"`
	// Roles are among gateway, instance, operator-read, operator.
	Roles stringList `yaml:"roles"`
	// TokenSHA256 are hex SHA-256 hashes of the identity's bearer tokens
	// (several during a rotation).
	TokenSHA256 stringList `yaml:"token_sha256"`
	// Cert are client-certificate names that prove the identity:
	// dns:NAME, uri:URI, email:ADDRESS, ip:ADDRESS (SANs) or cn:NAME.
	Cert stringList `yaml:"cert"`
	// Bind restricts an instance identity to a pool (and deployment,
	// instance id).
	Bind *bindEntry `yaml:"bind"`
	// Flow binds a gateway identity's picks to a flow and a maximum
	// priority (flow control; flowbind.go).
	Flow *flowEntry `yaml:"flow"`
}

type bindEntry struct {
	Pool       string `yaml:"pool"`
	Deployment string `yaml:"deployment"`
	InstanceID string `yaml:"instance_id"`
}

// stringList decodes a YAML scalar as a list of one.
type stringList []string

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = stringList{n.Value}
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// maxTokensFileBytes bounds the tokens file: about 50,000 identities.
const maxTokensFileBytes = 16 << 20

// loadTokensFile reads and checks a tokens file of at most
// maxTokensFileBytes. Every error names the file and, where it applies,
// the identity.
func loadTokensFile(path string) (*table, error) { return loadTokensFileMax(path, maxTokensFileBytes) }

// loadTokensFileMax is loadTokensFile with a size limit of limit bytes.
func loadTokensFileMax(path string, limit int) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer func() { _ = f.Close() }() // opened for reading: nothing to lose
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o002 != 0 {
		return nil, fmt.Errorf("tokens file %s is world-writable (mode %v): anyone on the host could add an identity; chmod o-w it",
			path, fi.Mode().Perm())
	}
	raw, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("tokens file %s is over %d bytes", path, limit)
	}
	t, err := parseTokens(raw)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return t, nil
}

// parseTokens parses and checks the content of a tokens file.
func parseTokens(raw []byte) (*table, error) {
	var tf tokensFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&tf); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	t := &table{tokens: make(map[[32]byte]tokenEntry), certs: make(map[string]*Principal)}
	names := make(map[string]bool)
	for i, e := range tf.Identities {
		id, err := t.add(e, names)
		if err != nil {
			return nil, fmt.Errorf("identities[%d] %q: %w", i, e.Name, err)
		}
		t.identities = append(t.identities, id)
	}
	return t, nil
}

// add checks one entry and indexes its tokens and certificate names.
func (t *table) add(e identityEntry, names map[string]bool) (*Principal, error) {
	if err := checkIdentityName(e.Name); err != nil {
		return nil, err
	}
	if names[e.Name] {
		return nil, errors.New("name used by another identity")
	}
	names[e.Name] = true
	id := &Principal{Name: e.Name}
	for _, r := range e.Roles {
		i := slices.IndexFunc(roleNames, func(n roleName) bool { return n.name == r })
		if i < 0 {
			return nil, fmt.Errorf("unknown role %q; the roles are gateway, instance, operator-read, operator", r)
		}
		id.Roles |= roleNames[i].role
	}
	if id.Roles == 0 {
		return nil, errors.New("no roles")
	}
	if len(e.TokenSHA256) == 0 && len(e.Cert) == 0 {
		return nil, errors.New("neither token_sha256 nor cert: nothing can prove this identity")
	}
	if e.Bind != nil {
		if id.Roles&RoleInstance == 0 {
			return nil, errors.New("bind is only for identities with role instance")
		}
		if e.Bind.Pool == "" {
			return nil, errors.New("bind needs a pool")
		}
		id.Bind = &Binding{Pool: e.Bind.Pool, Deployment: e.Bind.Deployment, Instance: e.Bind.InstanceID}
	}
	if e.Flow != nil {
		fb, err := e.Flow.binding(id.Roles)
		if err != nil {
			return nil, err
		}
		id.Flow = fb
	}
	for _, h := range e.TokenSHA256 {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("token_sha256 %.12q... is not 64 hex digits: store the SHA-256 of the token (prefixrouted hash-token), never the token", h)
		}
		var sum [32]byte
		copy(sum[:], b)
		if _, dup := t.tokens[sum]; dup {
			return nil, fmt.Errorf("token_sha256 %s… is also another identity's", strings.ToLower(h[:12]))
		}
		t.tokens[sum] = tokenEntry{hash: sum, p: id}
	}
	for _, c := range e.Cert {
		key, err := certName(c)
		if err != nil {
			return nil, err
		}
		if other := t.certs[key]; other != nil {
			return nil, fmt.Errorf("cert %q is also identity %q's", c, other.Name)
		}
		t.certs[key] = id
	}
	id.viaToken = &Caller{Principal: id, Via: "token"}
	id.viaCert = &Caller{Principal: id, Via: "cert"}
	return id, nil
}

// checkIdentityName allows 1 to 128 bytes of letters, digits and ._@:/+-.
func checkIdentityName(s string) error {
	if s == "" || len(s) > 128 {
		return errors.New("name must be 1 to 128 bytes")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@:/+-", r)) {
			return fmt.Errorf("name has %q; use letters, digits and ._@:/+-", r)
		}
	}
	return nil
}

// certName normalises a cert entry: kind:value with the kind one of dns,
// uri, email, ip, cn; DNS names are case-insensitive, IPs canonical.
func certName(s string) (string, error) {
	kind, v, ok := strings.Cut(s, ":")
	kind = strings.ToLower(kind)
	if !ok || v == "" {
		return "", fmt.Errorf("cert %q: want kind:value with kind dns, uri, email, ip or cn", s)
	}
	switch kind {
	case "dns":
		return "dns:" + strings.ToLower(v), nil
	case "uri", "email", "cn":
		return kind + ":" + v, nil
	case "ip":
		ip := net.ParseIP(v)
		if ip == nil {
			return "", fmt.Errorf("cert %q: not an IP address", s)
		}
		return "ip:" + ip.String(), nil
	}
	return "", fmt.Errorf("cert %q: kind %q is not dns, uri, email, ip or cn", s, kind)
}
