package netaddr

import (
	"strings"
	"testing"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:50051": true, "127.9.9.9:1": true, "[::1]:1": true, "localhost:1": true, "LocalHost:1": true,
		":50051": false, "0.0.0.0:1": false, "10.0.0.1:1": false, "[::]:1": false, "example.com:1": false,
		"127.0.0.1": false, "": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestCheckHostPort: the address rule at each edge.
func TestCheckHostPort(t *testing.T) {
	long := strings.Repeat("a", 63)
	for addr, want := range map[string]string{
		"10.0.0.1:8000": "", "[::1]:1": "", "[2001:db8::1]:65535": "", "vllm-0.vllm.ns.svc.cluster.local:8000": "",
		"a:1": "", "host.:80": "", long + ".b:1": "", "A-1.b2:443": "",
		"10.0.0.1":                            "is not host:port (missing port in address)",
		"10.0.0.1:0":                          `port "0" is not a number in 1-65535`,
		"10.0.0.1:65536":                      `port "65536" is not a number in 1-65535`,
		"10.0.0.1:-1":                         `port "-1"`,
		"10.0.0.1:http":                       `port "http"`,
		"10.0.0.1:":                           `port ""`,
		":8000":                               "has no host",
		"a..b:1":                              "has an empty label",
		"-a:1":                                "starting or ending with '-'",
		"a_b:1":                               `contains '_'`,
		"a b:1":                               `contains ' '`,
		long + "a:1":                          "a label of 64 bytes",
		"[fe80::1%eth0]:1":                    "is not an IP address",
		"1::2:80":                             "too many colons",
		strings.Repeat(long+".", 4) + "com:1": "a DNS name has at most 253",
	} {
		err := CheckHostPort(addr)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckHostPort(%q) = %v, want nil", addr, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckHostPort(%q) = %v, want an error with %q", addr, err, want)
		}
	}
}
