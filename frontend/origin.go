package frontend

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// LoopbackHost reports whether a Host header names the loopback interface
// (127.0.0.0/8, ::1, localhost): without a tokens file the HTTP listener
// is on loopback, so another Host is a DNS-rebinding page's.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// SameOrigin refuses a request a browser sent from another site: a
// Sec-Fetch-Site other than same-origin or none, or an Origin (the opaque
// "null" included) other than this listener's own scheme and Host.
// Clients that are not browsers send neither header and pass.
func SameOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Errorf("Sec-Fetch-Site %q: accepted from this listener's own origin only", site)
	}
	if vs := r.Header.Values("Origin"); len(vs) > 0 {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if len(vs) > 1 || !strings.EqualFold(vs[0], scheme+"://"+r.Host) {
			return fmt.Errorf("the Origin header %q is not this listener's (%s://%s): accepted from its own origin only", strings.Join(vs, ", "), scheme, r.Host)
		}
	}
	return nil
}

// CheckLoopbackHost refuses a request whose Host is not a loopback name
// (LoopbackHost): what every path of the HTTP listener answers a
// DNS-rebinding page when authentication is off.
func CheckLoopbackHost(r *http.Request) error {
	if !LoopbackHost(r.Host) {
		return fmt.Errorf("the Host header %q is not a loopback name: without --tokens-file the HTTP listener answers only http://127.0.0.1, [::1] or localhost", r.Host)
	}
	return nil
}

// unauthenticatedCheck is what a request gets when authentication is off:
// CheckLoopbackHost (DNS rebinding) and SameOrigin (a cross-site page).
func unauthenticatedCheck(r *http.Request) error {
	if err := CheckLoopbackHost(r); err != nil {
		return err
	}
	return SameOrigin(r)
}
