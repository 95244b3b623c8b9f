package frontend

import (
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// GRPC is a gRPC front end that turns another protocol's requests into
// Picks (through Picker.PickFor) on a listener of its own: the Envoy
// ext_proc endpoint picker (frontend/extproc). The daemon serves it on its
// own grpc.Server with the same middleware as the main listener (telemetry,
// authentication and authorization by the tokens file, recovery) and a
// gRPC health service. The command (cmd/prefixrouted) builds it and hands
// it to the daemon, which calls Register.
type GRPC struct {
	// Name names the front end in logs and errors, and its flags'
	// prefix: "extproc" for --extproc-listen.
	Name string
	// Listen is the address; "" turns the front end off.
	Listen string
	// TLS is how the listener is secured.
	TLS TLSMode
	// MaxRecvMsgBytes bounds one gRPC message of the front end; 0 means
	// the daemon's MaxRecvMsgBytes.
	MaxRecvMsgBytes int
	// Register registers the front end's services on gs and returns the
	// service names the health service reports SERVING (besides "").
	Register func(gs grpc.ServiceRegistrar, deps Deps) ([]string, error)
}

// Deps is what the daemon gives a gRPC front end's Register.
type Deps struct {
	Picker Picker               // the router
	Meter  metric.Meter         // the daemon's metrics (/metrics)
	Tracer trace.TracerProvider // the daemon's traces (per the OTEL_* environment)
	Logger *slog.Logger         // the daemon's log
	// MaxPrefixBlocks is the daemon's --max-prefix-blocks, the default of
	// a gateway.Config that sets none.
	MaxPrefixBlocks int
}

// TLSMode is how a gRPC front end's listener is secured.
type TLSMode string

// The TLSMode choices, as --extproc-tls spells them.
const (
	// TLSDaemon uses the daemon's --tls-cert/--tls-key (reloaded on
	// change) when they are set, plaintext otherwise. The default.
	TLSDaemon TLSMode = ""
	// TLSPlaintext serves plaintext gRPC even when the daemon has TLS (a
	// mesh encrypts, or the gateway runs next to the router).
	TLSPlaintext TLSMode = "plaintext"
	// TLSSelfSigned serves TLS with an ECDSA P-256 certificate generated
	// at start, for gateways that require TLS to the endpoint picker but
	// skip its verification (GIE's reference Envoy config).
	TLSSelfSigned TLSMode = "self-signed"
)

// ParseTLSMode reads a --extproc-tls value: "daemon" (or ""), "plaintext"
// or "self-signed".
func ParseTLSMode(s string) (TLSMode, error) {
	switch s {
	case "", "daemon":
		return TLSDaemon, nil
	case string(TLSPlaintext), string(TLSSelfSigned):
		return TLSMode(s), nil
	}
	return "", fmt.Errorf("%q is not daemon, plaintext or self-signed", s)
}

// Check validates the front end: a name, a Register function, a known TLS
// mode.
func (f *GRPC) Check() error {
	if f.Name == "" {
		return errors.New("front end without a name")
	}
	if f.Register == nil {
		return fmt.Errorf("front end %s has no Register function", f.Name)
	}
	if _, err := ParseTLSMode(string(f.TLS)); err != nil {
		return fmt.Errorf("--%s-tls: %w", f.Name, err)
	}
	return nil
}
