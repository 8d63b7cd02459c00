// Package redistopo starts real Redis topologies for tests: a Redis Cluster
// and a primary with a replica watched by Redis Sentinel, each on free
// loopback ports, from Debian's redis-server, torn down when the test ends
// (failed or not).
package redistopo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"smsgw/internal/testenv"
)

// Node is one redis-server process of the test's own.
type Node struct {
	Addr   string
	Port   int
	t      testing.TB
	conf   func(port int, dir string) []string
	dir    string
	cmd    *exec.Cmd
	out    *testenv.Buffer
	exited chan struct{}
}

// Kill ends the node at once (SIGKILL), as a crash would.
func (n *Node) Kill() {
	if n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// Pause freezes the node (SIGSTOP); Resume lets it go on.
func (n *Node) Pause()  { _ = n.cmd.Process.Signal(syscall.SIGSTOP) }
func (n *Node) Resume() { _ = n.cmd.Process.Signal(syscall.SIGCONT) }

// Client is a plain client on this node alone.
func (n *Node) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr, DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
}

func (n *Node) alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// serverBinary finds redis-server, failing (in CI) or skipping the test when
// it is missing; make test installs it.
func serverBinary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "redis-server (apt-get install redis-server)", err)
	}
	return p
}

// freePort finds a loopback port that is free, and whose cluster bus port
// (port + 10000) is free too. Both lie below the kernel's ephemeral range
// (32768 and up), so a port another test was just handed by the kernel
// (listen on :0, close, pass it on) is never taken meanwhile.
func freePort(t testing.TB) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(2700)
		if portFree(p) && portFree(p+10000) {
			return p
		}
	}
	t.Fatal("redistopo: no free loopback port")
	return 0
}

func portFree(p int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// start runs redis-server with args (after a config file, if any) in a
// directory of its own, retrying on another port if the chosen one was taken
// meanwhile, and waits until it answers PING.
func start(t testing.TB, conf func(port int, dir string) []string) *Node {
	t.Helper()
	serverBinary(t)
	var last string
	for range 5 {
		n := &Node{Port: freePort(t), dir: t.TempDir(), t: t, conf: conf}
		n.Addr = "127.0.0.1:" + strconv.Itoa(n.Port)
		if err := n.run(); err == nil {
			return n
		}
		last = n.out.String()
		n.Kill()
	}
	t.Fatalf("redistopo: redis-server did not start:\n%s", last)
	return nil
}

// Restart starts a killed node again on its port, empty (nothing is
// persisted), as a supervisor would.
func (n *Node) Restart() {
	n.t.Helper()
	if n.alive() {
		n.t.Fatal("redistopo: restart of a running node")
	}
	if err := n.run(); err != nil {
		n.t.Fatalf("redistopo: restart %s: %v\n%s", n.Addr, err, n.out.String())
	}
}

// run starts the process and waits until it answers PING.
func (n *Node) run() error {
	t := n.t
	n.out, n.exited = &testenv.Buffer{}, make(chan struct{})
	cmd := exec.Command(serverBinary(t), n.conf(n.Port, n.dir)...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = n.out, n.out
	// The server dies with the test process even if cleanup never runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistopo: start redis-server: %v", err)
	}
	n.cmd = cmd
	exited, out := n.exited, n.out
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("redis-server %s output:\n%s", n.Addr, out.String())
		}
	})
	c := n.Client()
	defer c.Close()
	return poll(15*time.Second, func() error {
		if !n.alive() {
			return errExited
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return c.Ping(ctx).Err()
	})
}

var errExited = fmt.Errorf("redis-server exited")

// poll calls f until it succeeds or d has passed, and returns its last error.
func poll(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || err == errExited || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func baseArgs(port int, dir string) []string {
	return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", "", "--repl-diskless-sync-delay", "0"}
}

// Cluster is a Redis Cluster: its masters, then their replicas if any.
type Cluster struct {
	Nodes []*Node
}

// Addrs lists the nodes' addresses, as cluster_addrs wants them.
func (c *Cluster) Addrs() []string { return addrs(c.Nodes) }

// Client is a cluster client on it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second})
}

// StartCluster starts masters cluster nodes, assigns them the hash slots in
// equal ranges, and waits until every node says the cluster is ok.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	return startCluster(t, masters, false)
}

// StartReplicatedCluster is StartCluster with one replica per master, in
// sync before it returns. Nodes lists the masters first, then their
// replicas in the same order.
func StartReplicatedCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	return startCluster(t, masters, true)
}

func clusterNode(t testing.TB) *Node {
	t.Helper()
	return start(t, func(port int, dir string) []string {
		return append(baseArgs(port, dir), "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-node-timeout", "2000")
	})
}

func startCluster(t testing.TB, masters int, replicated bool) *Cluster {
	t.Helper()
	c := &Cluster{}
	for range masters {
		c.Nodes = append(c.Nodes, clusterNode(t))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first := c.Nodes[0].Client()
	defer first.Close()
	for i, n := range c.Nodes {
		cl := n.Client()
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		slots := make([]int, 0, hi-lo+1)
		for s := lo; s <= hi; s++ {
			slots = append(slots, s)
		}
		err := cl.ClusterAddSlots(ctx, slots...).Err()
		if err == nil && i > 0 {
			err = first.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(n.Port)).Err()
		}
		cl.Close()
		if err != nil {
			t.Fatalf("redistopo: cluster setup on %s: %v", n.Addr, err)
		}
	}
	if replicated {
		for i := range masters {
			primary := c.Nodes[i]
			pc := primary.Client()
			id, err := pc.Do(ctx, "cluster", "myid").Text()
			pc.Close()
			if err != nil {
				t.Fatalf("redistopo: cluster myid: %v", err)
			}
			r := clusterNode(t)
			c.Nodes = append(c.Nodes, r)
			rc := r.Client()
			err = rc.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(primary.Port)).Err()
			if err == nil {
				// The replica must know the primary's id before following it.
				err = poll(30*time.Second, func() error { return rc.Do(ctx, "cluster", "replicate", id).Err() })
			}
			rc.Close()
			if err != nil {
				t.Fatalf("redistopo: replica of %s: %v", primary.Addr, err)
			}
		}
	}
	for i, n := range c.Nodes {
		cl := n.Client()
		err := poll(60*time.Second, func() error {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))) {
				return fmt.Errorf("not ready: %s", firstLine(info))
			}
			return nil
		})
		if err == nil && replicated && i < masters {
			err = replicaOnline(n)
		}
		cl.Close()
		if err != nil {
			t.Fatalf("redistopo: cluster node %s never became ok: %v", n.Addr, err)
		}
	}
	return c
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// StartSingle starts one Redis of the test's own (one it may freeze, kill
// or flush without disturbing anyone).
func StartSingle(t testing.TB) *Node {
	t.Helper()
	return start(t, baseArgs)
}

// StartReplicated starts a primary and a replica of it, and waits until the
// replica is in sync. The replica reaches the primary through link, which a
// test may cut to stop replication while both keep running.
func StartReplicated(t testing.TB) (primary, replica *Node, link *testenv.Proxy) {
	t.Helper()
	primary = start(t, baseArgs)
	link = testenv.NewProxy(t, primary.Addr)
	_, linkPort, _ := net.SplitHostPort(link.Addr())
	replica = start(t, func(port int, dir string) []string {
		return append(baseArgs(port, dir), "--replicaof", "127.0.0.1", linkPort)
	})
	if err := replicaOnline(primary); err != nil {
		t.Fatalf("redistopo: replica: %v", err)
	}
	return primary, replica, link
}

// replicaOnline waits until primary streams to a replica: after a full
// sync the primary waits for the replica's first acknowledgement (up to a
// second) before it counts it, and WAIT would not.
func replicaOnline(primary *Node) error {
	c := primary.Client()
	defer c.Close()
	return poll(30*time.Second, func() error {
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "state=online") {
			return fmt.Errorf("replica of %s not online", primary.Addr)
		}
		return nil
	})
}

// SentinelSet is one primary, its replica and the sentinels watching them.
type SentinelSet struct {
	Master    string // the name the sentinels monitor
	Primary   *Node
	Replica   *Node
	Link      *testenv.Proxy // the replica's connection to the primary
	Sentinels []*Node
}

// SentinelAddrs lists the sentinels, as sentinel_addrs wants them.
func (s *SentinelSet) SentinelAddrs() []string { return addrs(s.Sentinels) }

func addrs(nodes []*Node) []string {
	a := make([]string, len(nodes))
	for i, n := range nodes {
		a[i] = n.Addr
	}
	return a
}

// StartSentinel starts a primary, a replica of it, and sentinels (quorum:
// a majority) that call the primary down after downAfter, and waits until
// the replica is in sync and every sentinel knows the replica and the other
// sentinels, so that a failover can happen.
func StartSentinel(t testing.TB, sentinels int, downAfter time.Duration) *SentinelSet {
	t.Helper()
	s := &SentinelSet{Master: "smsgw"}
	s.Primary, s.Replica, s.Link = StartReplicated(t)
	ctx := context.Background()
	for range sentinels {
		s.Sentinels = append(s.Sentinels, start(t, func(port int, dir string) []string {
			conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile \"\"\n"+
				"sentinel monitor %s 127.0.0.1 %d %d\n"+
				"sentinel down-after-milliseconds %s %d\n"+
				"sentinel failover-timeout %s 10000\n"+
				"sentinel parallel-syncs %s 1\n",
				port, dir, s.Master, s.Primary.Port, sentinels/2+1, s.Master, downAfter.Milliseconds(), s.Master, s.Master)
			path := filepath.Join(dir, "sentinel.conf")
			if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{path, "--sentinel"}
		}))
	}
	for _, n := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: n.Addr})
		err := poll(60*time.Second, func() error {
			reps, err := sc.Replicas(ctx, s.Master).Result()
			if err != nil {
				return err
			}
			peers, err := sc.Sentinels(ctx, s.Master).Result()
			if err != nil {
				return err
			}
			if len(reps) < 1 || len(peers) < sentinels-1 {
				return fmt.Errorf("sentinel %s knows %d replicas, %d peers", n.Addr, len(reps), len(peers))
			}
			return nil
		})
		sc.Close()
		if err != nil {
			t.Fatalf("redistopo: %v", err)
		}
	}
	return s
}
