//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestExtprocListen: the binary serves the ext_proc front end on
// --extproc-listen with --extproc-tls self-signed, and its health answers
// SERVING for the ext_proc service.
func TestExtprocListen(t *testing.T) {
	bin, dir := buildDaemon(t)
	p := startDaemonWith(t, bin, "--listen", "127.0.0.1:0", "--http-listen", "off", "--data-dir", filepath.Join(dir, "data"),
		"--log-format", "json", "--extproc-listen", "127.0.0.1:0", "--extproc-tls", "self-signed")
	var addr string
	p.mu.Lock()
	for _, m := range p.logs {
		if m["msg"] == "front end serving" && m["front_end"] == "extproc" && m["tls"] == "self-signed" {
			addr, _ = m["grpc"].(string)
		}
	}
	p.mu.Unlock()
	if addr == "" {
		t.Fatalf("no front end serving line: %v", p.logs)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	r, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ext_proc.v3.ExternalProcessor"})
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v, %v", r, err)
	}
}
