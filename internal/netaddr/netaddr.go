// Package netaddr holds the one rule the daemon and its clients share for
// "does this address stay on this host", and the form of an address
// instances report (CheckHostPort).
package netaddr

import (
	"errors"
	"fmt"
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

// Port limits of CheckHostPort.
const (
	MinPort = 1
	MaxPort = 65535
	// MaxHostBytes is the longest DNS name (RFC 1035).
	MaxHostBytes = 253
)

// CheckHostPort returns nil when addr is host:port with host an IP
// address (IPv6 in brackets) or a DNS name (labels of 1-63 letters,
// digits and hyphens, not starting or ending with a hyphen, at most 253
// bytes, an optional trailing dot) and port a decimal number in 1-65535;
// else an error saying what is wrong. It resolves nothing.
func CheckHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		why := err.Error()
		var ae *net.AddrError
		if errors.As(err, &ae) {
			why = ae.Err
		}
		return fmt.Errorf("%q is not host:port (%s)", addr, why)
	}
	if err := checkPort(port); err != nil {
		return fmt.Errorf("%q: %v", addr, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host; want an IP address or a DNS name before the port", addr)
	}
	if ip := net.ParseIP(host); ip != nil {
		return nil
	}
	if strings.Contains(host, ":") || strings.Contains(host, "%") {
		return fmt.Errorf("%q: host %q is not an IP address", addr, host)
	}
	if err := checkDNSName(host); err != nil {
		return fmt.Errorf("%q: host %v", addr, err)
	}
	return nil
}

func checkPort(port string) error {
	n := 0
	for _, c := range port {
		if c < '0' || c > '9' || n > MaxPort {
			return fmt.Errorf("port %q is not a number in %d-%d", port, MinPort, MaxPort)
		}
		n = n*10 + int(c-'0')
	}
	if port == "" || n < MinPort || n > MaxPort {
		return fmt.Errorf("port %q is not a number in %d-%d", port, MinPort, MaxPort)
	}
	return nil
}

func checkDNSName(host string) error {
	name := strings.TrimSuffix(host, ".")
	if len(name) > MaxHostBytes {
		return fmt.Errorf("is %d bytes; a DNS name has at most %d", len(name), MaxHostBytes)
	}
	for _, label := range strings.Split(name, ".") {
		switch {
		case label == "":
			return fmt.Errorf("%q has an empty label", host)
		case len(label) > 63:
			return fmt.Errorf("%q has a label of %d bytes; at most 63", host, len(label))
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Errorf("%q has a label starting or ending with '-'", host)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%q contains %q; a DNS name has letters, digits, '-' and '.'", host, c)
			}
		}
	}
	return nil
}
