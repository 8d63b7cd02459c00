package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP forwarder in front of a real service, for fault tests: Cut
// drops every connection and refuses new ones, as a dead server would; Heal
// lets them through again.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Heal accepts connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			in.Close()
			continue
		}
		go func() {
			out, err := net.Dial("tcp", p.target)
			if err != nil || !p.track(out) {
				in.Close()
				if out != nil {
					out.Close()
				}
				return
			}
			go func() { io.Copy(out, in); out.Close() }()
			io.Copy(in, out)
			in.Close()
		}()
	}
}
