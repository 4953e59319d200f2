// Package redistest gives tests a real Redis server with per-test isolation: a unique key
// prefix (and asynq queue name) whose keys are deleted when the test ends. The server is
// $REDIS_URL, else 127.0.0.1:6379. Tests that must stop or restart Redis start their own
// redis-server with Start.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"outerloop/lib/testwait"
)

// URL returns the Redis URL tests use.
func URL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// Options returns client options for URL.
func Options(t testing.TB) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("redistest: REDIS_URL %q: %v", URL(), err)
	}
	return o
}

// Env is one test's isolated slice of the shared server.
type Env struct {
	Client *redis.Client
	Prefix string // key prefix for the store, ends with ':'
	Queue  string // asynq queue name, unique to the test
}

// New returns a client and a unique prefix; every key under the prefix and the asynq queue is
// removed at cleanup. It fails the test if Redis does not answer.
func New(t testing.TB) *Env {
	t.Helper()
	opts := Options(t)
	c := redis.NewClient(opts)
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: Redis at %s does not answer: %v (the test command starts one; see README)", URL(), err)
	}
	id := randomID()
	e := &Env{Client: c, Prefix: "oltest:" + id + ":", Queue: "oltest-" + id}
	t.Cleanup(func() {
		ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
		defer cancel()
		DeleteMatching(ctx, c, e.Prefix+"*")
		// The queue and its urgent sibling (workitems.UrgentQueue: recoveries and wakes).
		for _, q := range []string{e.Queue, e.Queue + "-urgent"} {
			DeleteMatching(ctx, c, "asynq:{"+q+"}*")
			c.SRem(ctx, "asynq:queues", q)
		}
		_ = c.Close()
	})
	return e
}

// DeleteMatching deletes every key matching pattern (SCAN, never KEYS).
func DeleteMatching(ctx context.Context, c redis.UniversalClient, pattern string) {
	iter := c.Scan(ctx, 0, pattern, 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			c.Del(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Del(ctx, batch...)
	}
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Server is a redis-server this test started and owns.
type Server struct {
	Addr string
	Dir  string
	cmd  *exec.Cmd
	args []string
}

// Start runs a private redis-server on a free port (AOF on, in a temp dir) and stops it at
// cleanup. The test is skipped if redis-server is not installed outside CI, failed inside CI.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redistest: redis-server not installed")
		}
		t.Skip("redis-server not installed")
	}
	port := freePort(t)
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: t.TempDir()}
	s.args = append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", s.Dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--maxmemory-policy", "noeviction"}, extra...)
	s.start(t, bin)
	t.Cleanup(func() { s.Stop() })
	return s
}

// freePort returns a free port below Linux's ephemeral range (32768–60999): a server that is
// stopped and restarted on its port (Restart, a test's outage) must not find it taken by a
// client's outgoing connection, which the kernel gives ports of that range.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := 20000 + mathrand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = l.Close()
			return port
		}
	}
	t.Fatal("redistest: no free port in 20000-32000")
	return 0
}

func (s *Server) start(t testing.TB, bin string) {
	t.Helper()
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Stdout, _ = os.Create(filepath.Join(s.Dir, "redis.log"))
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("redistest: start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	began, deadline := time.Now(), testwait.Deadline(t)
	for {
		// Polling a freshly started server's port is the only readiness signal it gives.
		// NOAUTH answers too: the server runs with an ACL file (no default user).
		if err := c.Ping(context.Background()).Err(); err == nil || strings.Contains(err.Error(), "NOAUTH") {
			return
		} else if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			t.Fatalf("redistest: redis-server on %s not ready after %s: %v\n%s", s.Addr, time.Since(began).Round(time.Second), err,
				strings.TrimSpace(string(log)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: what a crash looks like) and waits for it.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Pause stops the server process (SIGSTOP): connections stay open and commands wait, as in a
// long fork, a stuck disk or a VM pause. Resume continues it.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("redistest: pause redis-server: %v", err)
	}
}

// Resume continues a paused server (SIGCONT); the commands that waited are answered.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("redistest: resume redis-server: %v", err)
	}
}

// Restart kills and starts the server again on the same port and data dir.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	bin, _ := exec.LookPath("redis-server")
	s.start(t, bin)
}

// URL returns the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// AsynqOpt returns asynq connection options for the shared test server.
func AsynqOpt(t testing.TB) asynq.RedisClientOpt {
	o := Options(t)
	return asynq.RedisClientOpt{Addr: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password}
}

// Sentinel is a private Redis Sentinel deployment: one primary, one replica and three
// sentinels, each its own redis-server process on a free port, stopped at cleanup.
type Sentinel struct {
	Master    string // the monitored name
	Primary   *Server
	Replica   *Server
	Sentinels []*Server
}

// StartSentinel starts a Sentinel deployment and waits until the sentinels see the replica.
// The sentinels run as `redis-server --sentinel` (what Debian's redis-sentinel is).
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	d := &Sentinel{Master: "olmaster"}
	d.Primary = Start(t, "--repl-diskless-sync-delay", "0") // Redis waits 5 s by default before a replica's first sync
	host, port, _ := net.SplitHostPort(d.Primary.Addr)
	d.Replica = Start(t, "--replicaof", host, port)
	bin, _ := exec.LookPath("redis-server")
	for range 3 {
		sp := freePort(t)
		s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", sp), Dir: t.TempDir()}
		conf := filepath.Join(s.Dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 2\n"+
			"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\nsentinel parallel-syncs %s 1\n",
			sp, s.Dir, d.Master, host, port, d.Master, d.Master, d.Master)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		s.args = []string{conf, "--sentinel"}
		s.start(t, bin)
		t.Cleanup(s.Stop)
		d.Sentinels = append(d.Sentinels, s)
	}
	// Ready when every sentinel knows the replica (a failover needs one to promote).
	deadline := testwait.Deadline(t)
	for _, s := range d.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr})
		for {
			reps, err := c.Replicas(context.Background(), d.Master).Result()
			if err == nil && len(reps) > 0 {
				break
			}
			if time.Now().After(deadline) {
				_ = c.Close()
				t.Fatalf("redistest: sentinel %s does not see the replica: %v %v", s.Addr, reps, err)
			}
			time.Sleep(100 * time.Millisecond) // sentinels discover replicas by polling INFO: no event to wait on
		}
		_ = c.Close()
	}
	return d
}

// URL returns the deployment's redis-sentinel:// URL.
func (d *Sentinel) URL() string {
	addrs := make([]string, len(d.Sentinels))
	for i, s := range d.Sentinels {
		addrs[i] = s.Addr
	}
	return "redis-sentinel://" + strings.Join(addrs, ",") + "/0?master=" + d.Master
}

// Failover waits until the replica has caught up with what the primary holds now, asks a
// sentinel to fail the primary over to it, and waits until the sentinels name the replica as
// the primary. Without the wait a failover right after the start promotes a replica that has
// not finished its first sync, and everything is lost with the old primary: replication lag,
// not what a test of the failover measures (writes in the failover's own window may still be
// lost: replication is asynchronous).
func (d *Sentinel) Failover(t testing.TB) {
	t.Helper()
	d.awaitReplicaCaughtUp(t)
	c := redis.NewSentinelClient(&redis.Options{Addr: d.Sentinels[0].Addr})
	defer c.Close()
	if err := c.Failover(context.Background(), d.Master).Err(); err != nil {
		t.Fatalf("redistest: sentinel failover: %v", err)
	}
	deadline := testwait.Deadline(t)
	for {
		addr, err := c.GetMasterAddrByName(context.Background(), d.Master).Result()
		if err == nil && len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == d.Replica.Addr {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the failover did not promote %s: %v %v", d.Replica.Addr, addr, err)
		}
		time.Sleep(100 * time.Millisecond) // the promotion is only visible by asking
	}
}

// awaitReplicaCaughtUp waits until the replica's link is up and its offset has reached the
// primary's offset of the moment it is called.
func (d *Sentinel) awaitReplicaCaughtUp(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	p := redis.NewClient(&redis.Options{Addr: d.Primary.Addr})
	defer p.Close()
	r := redis.NewClient(&redis.Options{Addr: d.Replica.Addr})
	defer r.Close()
	field := func(info, name string) string {
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, name+":"); ok {
				return v
			}
		}
		return ""
	}
	pi, err := p.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatalf("redistest: primary replication info: %v", err)
	}
	want, _ := strconv.ParseInt(field(pi, "master_repl_offset"), 10, 64)
	deadline := testwait.Deadline(t)
	for {
		ri, err := r.Info(ctx, "replication").Result()
		got, _ := strconv.ParseInt(field(ri, "slave_repl_offset"), 10, 64)
		if err == nil && field(ri, "master_link_status") == "up" && field(ri, "master_sync_in_progress") == "0" && got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the replica did not catch up (offset %d of %d): %v", got, want, err)
		}
		time.Sleep(20 * time.Millisecond) // replication progress is only visible by asking
	}
}
