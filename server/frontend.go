package server

import (
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// FrontEnd is a gRPC service that turns another protocol's requests into
// Picks (through Server.PickFor) on a listener of its own: the Envoy
// ext_proc endpoint picker (server/extproc). The daemon serves it on its
// own grpc.Server with the same middleware as the main listener (telemetry,
// authentication and authorization by the tokens file, recovery) and a
// gRPC health service. Packages of front ends import server, never the
// reverse: the command (cmd/prefixrouted) builds the front end and hands
// the daemon its Register function.
type FrontEnd struct {
	// Name names the front end in logs and errors, and its flags'
	// prefix: "extproc" for --extproc-listen.
	Name string
	// Listen is the address; "" turns the front end off.
	Listen string
	// TLS is how the listener is secured.
	TLS FrontEndTLS
	// MaxRecvMsgBytes bounds one gRPC message of the front end; 0 means
	// the daemon's MaxRecvMsgBytes.
	MaxRecvMsgBytes int
	// Register registers the front end's services on gs and returns the
	// service names the health service reports SERVING (besides "").
	Register func(gs grpc.ServiceRegistrar, deps FrontEndDeps) ([]string, error)
}

// FrontEndDeps is what the daemon gives a front end's Register.
type FrontEndDeps struct {
	Server *Server              // the daemon's services and state
	Meter  metric.Meter         // the daemon's metrics (/metrics)
	Tracer trace.TracerProvider // the daemon's traces (per the OTEL_* environment)
	Logger *slog.Logger         // the daemon's log
}

// FrontEndTLS is how a front end's listener is secured.
type FrontEndTLS string

// The FrontEndTLS choices, as --extproc-tls spells them.
const (
	// FrontEndTLSDaemon uses the daemon's --tls-cert/--tls-key (reloaded
	// on change) when they are set, plaintext otherwise. The default.
	FrontEndTLSDaemon FrontEndTLS = ""
	// FrontEndPlaintext serves plaintext gRPC even when the daemon has TLS
	// (a mesh encrypts, or the gateway runs next to the router).
	FrontEndPlaintext FrontEndTLS = "plaintext"
	// FrontEndSelfSigned serves TLS with an ECDSA P-256 certificate
	// generated at start, for gateways that require TLS to the endpoint
	// picker but skip its verification (GIE's reference Envoy config).
	FrontEndSelfSigned FrontEndTLS = "self-signed"
)

// ParseFrontEndTLS reads a --extproc-tls value: "daemon" (or ""),
// "plaintext" or "self-signed".
func ParseFrontEndTLS(s string) (FrontEndTLS, error) {
	switch s {
	case "", "daemon":
		return FrontEndTLSDaemon, nil
	case string(FrontEndPlaintext), string(FrontEndSelfSigned):
		return FrontEndTLS(s), nil
	}
	return "", fmt.Errorf("%q is not daemon, plaintext or self-signed", s)
}

// check validates the front end for Start.
func (f *FrontEnd) check() error {
	if f.Name == "" {
		return errors.New("front end without a name")
	}
	if f.Register == nil {
		return fmt.Errorf("front end %s has no Register function", f.Name)
	}
	if _, err := ParseFrontEndTLS(string(f.TLS)); err != nil {
		return fmt.Errorf("--%s-tls: %w", f.Name, err)
	}
	return nil
}

// BlockSize is the pool's block_size_tokens (its policy's, or 0 when the
// router knows no such pool: the caller's default applies). Safe for
// concurrent use.
func (s *Server) BlockSize(pool string) int {
	p, err := s.reg.Pool(pool)
	if err != nil {
		return 0
	}
	return int(p.Config().Policy.BlockSizeTokens)
}

// Endpoint is one instance of a pool by id and address.
type Endpoint struct{ Instance, Address string }

// Endpoints appends the pool's instances, in snapshot order, to dst. The
// error is a gRPC status (NotFound for an unknown pool). Safe for
// concurrent use.
func (s *Server) Endpoints(pool string, dst []Endpoint) ([]Endpoint, error) {
	p, err := s.reg.Pool(pool)
	if err != nil {
		return dst, statusOf(err)
	}
	for _, in := range p.Instances(s.opts.Now()) {
		dst = append(dst, Endpoint{Instance: in.Instance, Address: in.Address})
	}
	return dst, nil
}

// MaxExcludes is the most exclude_instances (plus load-snapshot entries)
// one Pick may carry: the registry's limit, state.DefaultMaxExcludes
// unless configured.
func (s *Server) MaxExcludes() int { return s.reg.Limits().MaxExcludes }
