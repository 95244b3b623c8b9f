// Package natstest starts an in-process nats-server with JetStream for
// tests: the real server, on a random loopback port, its store in the
// test's temp dir. Only test code imports it.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// Server is an in-process nats-server with JetStream whose store dir
// and port survive Stop/Restart, so a test can take NATS away and bring
// the same server (same streams) back.
type Server struct {
	t    testing.TB
	dir  string
	port int

	mu  sync.Mutex
	srv *natsserver.Server
}

// Start starts a server on a random loopback port with its store in
// t.TempDir(); it is shut down at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	n := &Server{t: t, dir: t.TempDir(), port: -1}
	n.start()
	t.Cleanup(n.Stop)
	return n
}

func (n *Server) start() {
	n.t.Helper()
	opts := &natsserver.Options{
		ServerName:         "prefixroute-test",
		Host:               "127.0.0.1",
		Port:               n.port,
		JetStream:          true,
		StoreDir:           n.dir,
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  256 << 20,
		NoLog:              true,
		NoSigs:             true,
	}
	var lastErr error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		srv, err := natsserver.NewServer(opts)
		if err != nil {
			n.t.Fatalf("nats-server options: %v", err)
		}
		go srv.Start()
		if !srv.ReadyForConnections(5 * time.Second) {
			srv.Shutdown()
			lastErr = errors.New("not ready (port busy?)")
			continue
		}
		if !srv.JetStreamEnabled() {
			srv.Shutdown()
			n.t.Fatalf("nats-server: JetStream not enabled")
		}
		n.mu.Lock()
		n.srv = srv
		n.port = srv.Addr().(*net.TCPAddr).Port
		n.mu.Unlock()
		return
	}
	n.t.Fatalf("nats-server on port %d: %v", n.port, lastErr)
}

// URL is the client URL; it does not change across restarts.
func (n *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// Stop shuts the server down (idempotent); clients see the connection drop.
func (n *Server) Stop() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart starts the server again on the same port and store dir.
func (n *Server) Restart() {
	n.t.Helper()
	n.Stop()
	n.start()
}

// Addr is the server's host:port.
func (n *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }
