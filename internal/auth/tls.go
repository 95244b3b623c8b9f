package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"google.golang.org/grpc/credentials"
)

// TLSFiles names the PEM files of the listeners' TLS. Both listeners (gRPC
// and HTTP) serve CertFile/KeyFile once CertFile is set; with ClientCAFile,
// a client certificate is verified against it when the client sends one
// (tls.VerifyClientCertIfGiven) and then proves an identity of the tokens
// file. Every file is read again when it changes, at most every
// ReloadInterval, without a restart.
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
	// ReloadInterval is how often, at most, the files are checked for a
	// change. Default DefaultReloadInterval.
	ReloadInterval time.Duration
}

// Enabled reports whether the listeners serve TLS.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" }

// Check says what is missing from a partial configuration, naming the
// flags; nil for a complete one or none.
func (f TLSFiles) Check() error {
	switch {
	case f.CertFile == "" && f.KeyFile == "" && f.ClientCAFile == "":
		return nil
	case f.CertFile == "" && f.KeyFile == "":
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are verified in a TLS handshake")
	case f.CertFile == "" || f.KeyFile == "":
		return errors.New("--tls-cert and --tls-key go together")
	}
	return nil
}

// tlsMaterial is one loaded set of TLS files: a config per listener (they
// differ in ALPN protocols only). Immutable.
type tlsMaterial struct {
	grpc, http *tls.Config
}

// loadTLS reads the TLS files into configs for the two listeners.
func loadTLS(f TLSFiles) (*tlsMaterial, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", f.CertFile, f.KeyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s: %w", f.CertFile, err)
	}
	cert.Leaf = leaf
	var pool *x509.CertPool
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", f.ClientCAFile)
		}
	}
	mk := func(protos ...string) *tls.Config {
		c := &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cert},
			NextProtos:   protos,
		}
		if pool != nil {
			c.ClientCAs = pool
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
		return c
	}
	return &tlsMaterial{grpc: mk("h2"), http: mk("h2", "http/1.1")}, nil
}

// TLSServer serves the listeners' TLS configs, reloaded when the files
// change: a handshake takes the config in force, open connections keep
// theirs. Safe for concurrent use.
type TLSServer struct {
	r *reloader[tlsMaterial]
}

// NewTLSServer loads the files, which must include a certificate and its
// key (f.Check, f.Enabled); the files are checked for a change at most
// every f.ReloadInterval and reloads are logged on log.
func NewTLSServer(f TLSFiles, log *slog.Logger) (*TLSServer, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if !f.Enabled() {
		return nil, errors.New("TLS needs --tls-cert and --tls-key")
	}
	files := []string{f.CertFile, f.KeyFile}
	if f.ClientCAFile != "" {
		files = append(files, f.ClientCAFile)
	}
	r, err := newReloader("TLS certificate", files, f.ReloadInterval, log, func() (*tlsMaterial, error) { return loadTLS(f) })
	if err != nil {
		return nil, err
	}
	return &TLSServer{r: r}, nil
}

// GRPCCredentials are the gRPC listener's transport credentials: every
// handshake takes the config in force.
func (s *TLSServer) GRPCCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.r.get().grpc, nil
		},
	})
}

// HTTPConfig is the HTTP listener's TLS config: every handshake takes the
// config in force.
func (s *TLSServer) HTTPConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.r.get().http, nil
		},
	}
}

// ReloadStats counts the checks and reloads of the TLS files.
func (s *TLSServer) ReloadStats() ReloadStats { return s.r.stats() }
