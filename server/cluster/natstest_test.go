package cluster

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

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
