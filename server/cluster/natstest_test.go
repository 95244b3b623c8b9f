package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// testNATS is an in-process nats-server with JetStream whose store dir
// and port survive Stop/Restart, so a test can take NATS away and bring
// the same server (same streams) back.
type testNATS struct {
	t    testing.TB
	dir  string
	port int

	mu  sync.Mutex
	srv *server.Server
}

// startNATS starts a server on a random loopback port with its store in
// t.TempDir(); it is shut down at cleanup.
func startNATS(t testing.TB) *testNATS {
	t.Helper()
	n := &testNATS{t: t, dir: t.TempDir(), port: -1}
	n.start()
	t.Cleanup(n.Stop)
	return n
}

func (n *testNATS) start() {
	n.t.Helper()
	opts := &server.Options{
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
		srv, err := server.NewServer(opts)
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
func (n *testNATS) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// Stop shuts the server down (idempotent); clients see the connection drop.
func (n *testNATS) Stop() {
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
func (n *testNATS) Restart() {
	n.t.Helper()
	n.Stop()
	n.start()
}

// cutProxy is a TCP proxy in front of the server for one client, so a
// test can take NATS away from that client only.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	// gate is read-held by every forwarded write; Freeze write-holds it,
	// so the connections stay open but nothing gets through.
	gate sync.RWMutex
}

func startProxy(t testing.TB, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *cutProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate.RLock()
			_, werr := dst.Write(buf[:n])
			p.gate.RUnlock()
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze stops forwarding in both directions but keeps the connections
// open: the server looks alive to TCP and answers nothing.
func (p *cutProxy) Freeze() { p.gate.Lock() }

// Unfreeze resumes forwarding.
func (p *cutProxy) Unfreeze() { p.gate.Unlock() }

// Cut closes every proxied connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore accepts connections again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// testConfig is a Config for tests: fast reconnects, short timeouts.
func testConfig(url, name string) Config {
	return Config{
		URLs:            []string{url},
		Name:            name,
		ReconnectWait:   50 * time.Millisecond,
		ReconnectJitter: 10 * time.Millisecond,
		ApplyTimeout:    2 * time.Second,
	}
}

// dial dials a Link closed at cleanup.
func dial(t testing.TB, cfg Config, h Handlers) *Link {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := Dial(ctx, cfg, h)
	if err != nil {
		t.Fatalf("Dial %s: %v", cfg.Name, err)
	}
	t.Cleanup(l.Close)
	return l
}

// waitFor polls cond every 5ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
