package server

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

// enabled reports whether the listeners serve TLS.
func (f TLSFiles) enabled() bool { return f.CertFile != "" }

// check says what is missing from a partial configuration.
func (f TLSFiles) check() error {
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
	serial     string // of the server certificate, for the logs and tests
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
	return &tlsMaterial{grpc: mk("h2"), http: mk("h2", "http/1.1"), serial: leaf.SerialNumber.String()}, nil
}

// tlsServer serves the listeners' TLS configs, reloaded when the files
// change. Safe for concurrent use.
type tlsServer struct {
	r *reloader[tlsMaterial]
}

// newTLSServer loads the files; nil without TLS.
func newTLSServer(f TLSFiles, log *slog.Logger) (*tlsServer, error) {
	if !f.enabled() {
		return nil, nil
	}
	files := []string{f.CertFile, f.KeyFile}
	if f.ClientCAFile != "" {
		files = append(files, f.ClientCAFile)
	}
	r, err := newReloader("TLS certificate", files, f.ReloadInterval, log, func() (*tlsMaterial, error) { return loadTLS(f) })
	if err != nil {
		return nil, err
	}
	return &tlsServer{r: r}, nil
}

// grpcCredentials are the gRPC listener's transport credentials: every
// handshake takes the config in force.
func (s *tlsServer) grpcCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.r.get().grpc, nil
		},
	})
}

// httpConfig is the HTTP listener's TLS config.
func (s *tlsServer) httpConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.r.get().http, nil
		},
	}
}

// serial is the serial number of the certificate in force.
func (s *tlsServer) serial() string { return s.r.get().serial }
