// Package netaddr holds the one rule the daemon and its clients share for
// "does this address stay on this host".
package netaddr

import (
	"net"
	"strings"
)

// IsLoopback reports whether a host:port address is loopback only:
// localhost or an IP of 127.0.0.0/8 or ::1. An empty host (every
// interface) and other host names (not resolved) count as exposed. Safe for
// concurrent use.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
