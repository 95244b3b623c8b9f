package netaddr

import "testing"

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
