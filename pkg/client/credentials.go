package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// DialOptions are the credentials of a connection to a sidecar that runs
// with a tokens file and TLS (see SECURITY.md). The zero value is Dial's
// plaintext connection without credentials.
type DialOptions struct {
	// TLS, when not nil, makes the connection use TLS with this config
	// (see TLSConfig). Nil: plaintext.
	TLS *tls.Config
	// Token, when not empty, is sent with every call and stream as the
	// metadata "authorization: Bearer <Token>". It needs TLS, so that the
	// token never crosses a network in cleartext, unless InsecureToken is
	// set (see ReadTokenFile).
	Token string
	// InsecureToken allows Token without TLS: for a sidecar on loopback or
	// behind a mesh that already encrypts. Like gRPC's
	// PerRPCCredentials.RequireTransportSecurity, but opt-out.
	InsecureToken bool
}

// DialWith is Dial with credentials: TLS when o.TLS is set, and o.Token on
// every call. It fails at once, before any connection, when o.Token is set
// without TLS or InsecureToken, or is not a valid header value. Options in
// extra come last, as with Dial.
func DialWith(target string, o DialOptions, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	var opts []grpc.DialOption
	if o.TLS != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(o.TLS)))
	}
	if o.Token != "" {
		if o.TLS == nil && !o.InsecureToken {
			return nil, errors.New("a bearer token needs TLS, or it would cross the network in cleartext; set DialOptions.TLS, or InsecureToken for a loopback sidecar")
		}
		if err := checkToken(o.Token); err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{header: "Bearer " + o.Token, requireTLS: !o.InsecureToken}))
	}
	return Dial(target, append(opts, extra...)...)
}

// bearer is the per-RPC credentials of DialOptions.Token.
type bearer struct {
	header     string
	requireTLS bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.requireTLS }

// checkToken refuses a token that cannot travel in a header, naming no
// part of it.
func checkToken(tok string) error {
	for _, r := range tok {
		if r <= ' ' || r >= 0x7f {
			return errors.New("bearer token has a space, control or non-ASCII character; it must be printable ASCII")
		}
	}
	return nil
}

// ReadTokenFile returns the bearer token in the file at path: its first
// line, without surrounding spaces (a trailing newline, as in a Kubernetes
// secret, is fine). An empty first line is an error. The error never
// contains the token.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", fmt.Errorf("token file %s: the first line is empty; it should hold the token", path)
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("token file %s: %v", path, err)
	}
	return tok, nil
}

// TLSConfig returns a client TLS config (TLS 1.2 or later) for DialOptions:
// the server certificate is verified against the PEM certificates of caFile
// (the system roots when ""); certFile and keyFile, when set (both or
// neither), are the client certificate for mutual TLS, sent whatever CAs
// the server names; serverName, when set, is the name the server
// certificate must carry instead of the target's host.
func TLSConfig(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
		}
	}
	switch {
	case certFile == "" && keyFile == "":
	case certFile == "" || keyFile == "":
		return nil, errors.New("a TLS client certificate needs both its certificate and its key file")
	default:
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s / key %s: %w", certFile, keyFile, err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg, nil
}
