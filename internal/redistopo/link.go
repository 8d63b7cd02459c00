package redistopo

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"smsgw/internal/testenv"
)

// ClusterLink is a path from another region to a Cluster: one delay proxy
// per node, each cut-able together. A Cluster client dials the addresses
// the nodes announce (CLUSTER SLOTS, MOVED, ASK), which a plain TCP proxy
// in front of the seeds would let it bypass; each node's proxy therefore
// rewrites the nodes' addresses in what it carries back into the link's
// own, as a NAT-aware proxy (or cluster-announce-ip on the path) would.
type ClusterLink struct {
	proxies []*testenv.Proxy
}

// NewClusterLink opens a link to c adding delay each way.
func NewClusterLink(t testing.TB, c *Cluster, delay time.Duration) *ClusterLink {
	t.Helper()
	l := &ClusterLink{}
	rewriters := make([]*rewriter, len(c.Nodes))
	for i, n := range c.Nodes {
		rewriters[i] = newRewriter(t, n.Addr)
		l.proxies = append(l.proxies, testenv.NewDelayProxy(t, rewriters[i].ln.Addr().String(), delay))
	}
	var from [][]byte
	var pairs []string
	for i, n := range c.Nodes {
		proxyPort := port(l.proxies[i].Addr())
		// A node in CLUSTER SLOTS: its address as a bulk string, its port
		// as an integer; in a redirection: " host:port" ending the error.
		for _, form := range []string{"$9\r\n127.0.0.1\r\n:%s\r\n", " 127.0.0.1:%s\r\n"} {
			old := fmt.Sprintf(form, strconv.Itoa(n.Port))
			from = append(from, []byte(old))
			pairs = append(pairs, old, fmt.Sprintf(form, proxyPort))
		}
	}
	replacer := strings.NewReplacer(pairs...)
	for _, r := range rewriters {
		r.from, r.replacer = from, replacer
		go r.serve()
	}
	return l
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// Addrs are the seeds to give a Cluster client: the nodes' proxies.
func (l *ClusterLink) Addrs() []string {
	out := make([]string, len(l.proxies))
	for i, p := range l.proxies {
		out[i] = p.Addr()
	}
	return out
}

// Cut drops every connection to every node and refuses new ones.
func (l *ClusterLink) Cut() {
	for _, p := range l.proxies {
		p.Cut()
	}
}

// Heal lets connections through again.
func (l *ClusterLink) Heal() {
	for _, p := range l.proxies {
		p.Heal()
	}
}

// Requests counts the chunks clients sent over the link (see testenv.Proxy).
func (l *ClusterLink) Requests() int64 {
	var n int64
	for _, p := range l.proxies {
		n += p.Requests()
	}
	return n
}

// rewriter forwards to one node, replacing node addresses in its replies.
type rewriter struct {
	ln       net.Listener
	target   string
	from     [][]byte
	replacer *strings.Replacer // in one pass: a new port is never replaced again
}

func newRewriter(t testing.TB, target string) *rewriter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &rewriter{ln: ln, target: target}
}

func (r *rewriter) serve() {
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", r.target)
			if err != nil {
				return
			}
			defer out.Close()
			go func() { r.replies(in, out); in.Close() }()
			buf := make([]byte, 32<<10)
			for {
				n, err := in.Read(buf)
				if n > 0 {
					if _, werr := out.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// replies copies src to dst with the addresses replaced. A read that ends
// partway into an address is held until the rest arrives (every pattern
// begins with '$' or ' ', which occur nowhere else in one, so a held tail
// never overlaps a whole pattern; a reply ends in "\r\n", never held).
func (r *rewriter) replies(dst, src net.Conn) {
	var held []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			data := append(held, buf[:n]...)
			keep := r.partial(data)
			out := data[:len(data)-keep]
			if _, werr := io.WriteString(dst, r.replacer.Replace(string(out))); werr != nil {
				return
			}
			held = append([]byte(nil), data[len(data)-keep:]...)
		}
		if err != nil {
			return
		}
	}
}

// partial is the length of the longest end of data that begins a pattern
// without completing it.
func (r *rewriter) partial(data []byte) int {
	longest := 0
	for _, p := range r.from {
		for k := min(len(p)-1, len(data)); k > longest; k-- {
			if bytes.HasPrefix(p, data[len(data)-k:]) {
				longest = k
				break
			}
		}
	}
	return longest
}
