package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP forwarder in front of a real service, for fault tests: Cut
// drops every connection and refuses new ones, as a dead server would; Heal
// lets them through again. With a delay it stands for a link between
// regions: every chunk of bytes arrives that much later, each way, without
// limiting throughput.
type Proxy struct {
	target string
	ln     net.Listener
	delay  atomic.Int64 // nanoseconds per direction

	// conns counts connections accepted; requests counts chunks forwarded
	// from clients, which for Redis's request-reply protocol is about one
	// per round trip (a pipeline is one chunk).
	conns, requests atomic.Int64

	mu   sync.Mutex
	cut  bool
	open map[net.Conn]struct{}

	wg sync.WaitGroup // every goroutine of the proxy; the test's cleanup waits
}

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: target, ln: ln, open: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() { ln.Close(); p.Cut(); p.wg.Wait() })
	return p
}

// NewDelayProxy is NewProxy adding delay to each direction.
func NewDelayProxy(t testing.TB, target string, delay time.Duration) *Proxy {
	t.Helper()
	p := NewProxy(t, target)
	p.delay.Store(int64(delay))
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Conns counts the connections the proxy accepted.
func (p *Proxy) Conns() int64 { return p.conns.Load() }

// Requests counts the chunks clients sent through (see Proxy).
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Cut closes every open connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.open {
		c.Close()
	}
	p.open = map[net.Conn]struct{}{}
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
	p.open[c] = struct{}{}
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
		p.conns.Add(1)
		p.wg.Go(func() {
			out, err := net.Dial("tcp", p.target)
			if err != nil || !p.track(out) {
				in.Close()
				if out != nil {
					out.Close()
				}
				return
			}
			p.wg.Go(func() { p.pipe(out, in, &p.requests); out.Close() })
			p.pipe(in, out, nil)
			in.Close()
		})
	}
}

// chunk is bytes read at a moment, to be written delay later.
type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, each chunk delayed; count, when set, counts chunks.
func (p *Proxy) pipe(dst, src net.Conn, count *atomic.Int64) {
	if p.delay.Load() == 0 && count == nil {
		io.Copy(dst, src)
		return
	}
	q := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.at.Add(time.Duration(p.delay.Load()))); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				for range q { // drain so the reader never blocks
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if count != nil {
				count.Add(1)
			}
			q <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now()}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
}
