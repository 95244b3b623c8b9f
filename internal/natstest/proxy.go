package natstest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy in front of the NATS server for one client, so a
// test can take NATS away from that client only (Cut, Restore), keep the
// connection up with nothing answering (Freeze, FreezeAfter), and count the
// bytes the client exchanges with NATS. Safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn

	up, down atomic.Int64 // bytes client→NATS, NATS→client

	// gate is read-held by every write towards the client; a trap
	// write-holds it, so NATS's answers stop reaching the client while
	// the connection stays open.
	gate   sync.RWMutex
	trap   atomic.Pointer[[]byte]
	frozen atomic.Bool
}

// StartProxy listens on a random loopback port and forwards to target
// (host:port), until the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { p.Unfreeze(); ln.Close(); p.Cut() })
	return p
}

// URL is the client URL of the proxy.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *Proxy) serve() {
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
		go p.pipe(up, c, &p.up, false)
		go p.pipe(c, up, &p.down, true)
	}
}

func (p *Proxy) pipe(dst, src net.Conn, n *atomic.Int64, towardsReplica bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			n.Add(int64(k))
			if trap := p.trap.Load(); !towardsReplica && trap != nil && bytes.Contains(buf[:k], *trap) &&
				p.trap.CompareAndSwap(trap, nil) {
				p.gate.Lock() // before the write goes on: its answer is held
				p.frozen.Store(true)
			}
			if towardsReplica {
				p.gate.RLock()
			}
			_, werr := dst.Write(buf[:k])
			if towardsReplica {
				p.gate.RUnlock()
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// FreezeAfter makes the proxy hold everything NATS sends the client from
// the moment the client sends bytes containing s (once), until Unfreeze:
// the client's request reaches NATS, its answer does not.
func (p *Proxy) FreezeAfter(s string) {
	b := []byte(s)
	p.trap.Store(&b)
}

// Freeze holds everything NATS sends the client from now on, until
// Unfreeze: the connection stays up and nothing answers.
func (p *Proxy) Freeze() {
	if p.frozen.CompareAndSwap(false, true) {
		p.gate.Lock()
	}
}

// Unfreeze lets NATS's answers through again.
func (p *Proxy) Unfreeze() {
	p.trap.Store(nil)
	if p.frozen.CompareAndSwap(true, false) {
		p.gate.Unlock()
	}
}

// Cut closes every proxied connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Bytes is the total exchanged through the proxy so far, both directions.
func (p *Proxy) Bytes() int64 { return p.up.Load() + p.down.Load() }
