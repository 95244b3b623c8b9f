package daemon

import (
	"crypto/tls"

	"google.golang.org/grpc/credentials"
)

// listenerTLS is the listeners' TLS, reloaded when its files change:
// *auth.TLSServer. Safe for concurrent use.
type listenerTLS interface {
	// GRPCCredentials are the gRPC listener's transport credentials.
	GRPCCredentials() credentials.TransportCredentials
	// HTTPConfig is the HTTP listener's TLS config.
	HTTPConfig() *tls.Config
}
