package main

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/prefixroute/prefixroute/internal/netaddr"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// authFlags are the global flags of a sidecar with authentication: a bearer
// token read from a file, and TLS. There is deliberately no --token flag: a
// secret on the command line is visible to every user of the host (ps,
// /proc/PID/cmdline) and lands in shell history.
type authFlags struct {
	tokenFile                 string
	tls                       bool
	ca, cert, key, serverName string

	token string // read from tokenFile by dialOptions
}

// authEnv maps each flag to its environment variable.
var authEnv = []struct{ flag, env string }{
	{"token-file", "PREFIXCTL_TOKEN_FILE"},
	{"tls-ca", "PREFIXCTL_TLS_CA"},
	{"tls-cert", "PREFIXCTL_TLS_CERT"},
	{"tls-key", "PREFIXCTL_TLS_KEY"},
	{"tls-server-name", "PREFIXCTL_TLS_SERVER_NAME"},
}

func (a *authFlags) field(name string) *string {
	switch name {
	case "token-file":
		return &a.tokenFile
	case "tls-ca":
		return &a.ca
	case "tls-cert":
		return &a.cert
	case "tls-key":
		return &a.key
	}
	return &a.serverName
}

// fromEnv takes the defaults from the environment.
func (a *authFlags) fromEnv() {
	for _, e := range authEnv {
		if v := os.Getenv(e.env); v != "" {
			*a.field(e.flag) = v
		}
	}
}

// register adds the flags to fs, the root command's persistent flags.
func (a *authFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&a.tokenFile, "token-file", a.tokenFile, "file whose first line is the bearer token (env PREFIXCTL_TOKEN_FILE)")
	fs.BoolVar(&a.tls, "tls", a.tls, "use TLS (implied by the other --tls-* flags)")
	fs.StringVar(&a.ca, "tls-ca", a.ca, "PEM CA that signed the sidecar's certificate (env PREFIXCTL_TLS_CA)")
	fs.StringVar(&a.cert, "tls-cert", a.cert, "PEM client certificate for mutual TLS (env PREFIXCTL_TLS_CERT)")
	fs.StringVar(&a.key, "tls-key", a.key, "PEM key of --tls-cert (env PREFIXCTL_TLS_KEY)")
	fs.StringVar(&a.serverName, "tls-server-name", a.serverName, "name the sidecar's certificate must carry (env PREFIXCTL_TLS_SERVER_NAME)")
}

// usesTLS reports whether the connection uses TLS.
func (a *authFlags) usesTLS() bool {
	return a.tls || a.ca != "" || a.cert != "" || a.key != "" || a.serverName != ""
}

// dialOptions reads the token and TLS files. Errors are usage errors:
// nothing was sent.
func (a *authFlags) dialOptions(addr string) (client.DialOptions, error) {
	var o client.DialOptions
	if a.usesTLS() {
		cfg, err := client.TLSConfig(a.ca, a.cert, a.key, a.serverName)
		if err != nil {
			return o, usagef("--tls-*: %v", err)
		}
		o.TLS = cfg
	}
	if a.tokenFile != "" {
		tok, err := client.ReadTokenFile(a.tokenFile)
		if err != nil {
			return o, usagef("--token-file: %v", err)
		}
		if o.TLS == nil && !localAddr(addr) {
			return o, usagef("--token-file without TLS to %s: the token would cross the network in cleartext; pass --tls-ca (or --tls), or use a loopback --addr", addr)
		}
		o.Token, o.InsecureToken, a.token = tok, o.TLS == nil, tok
	}
	return o, nil
}

// localAddr reports whether the target stays on this host: a unix socket,
// localhost, or a loopback IP (as the daemon's own exposure check counts
// them).
func localAddr(target string) bool {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	return netaddr.IsLoopback(strings.TrimPrefix(target, "passthrough:///"))
}
