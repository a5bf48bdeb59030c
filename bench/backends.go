package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/lock/redlock"
)

// The etcd and Redlock tables start their own servers (etcd, and five
// redis-server processes) as children of this process, on free ports and a
// private data directory, and stop them (by PID) when the table is done.

type server struct {
	name string
	cmd  *exec.Cmd
	dir  string
}

func (s *server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startProc(name, dir string, args ...string) (*server, error) {
	cmd := exec.Command(name, args...)
	setDeathSignal(cmd)
	if dir != "" {
		f, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &server{name: name, cmd: cmd, dir: dir}, nil
}

// startEtcd starts one single-member etcd and returns it with a client.
func startEtcd() (*server, *clientv3.Client, error) {
	dir, err := os.MkdirTemp("", "latchkey-bench-etcd-")
	if err != nil {
		return nil, nil, err
	}
	cp, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	curl := fmt.Sprintf("http://127.0.0.1:%d", cp)
	purl := fmt.Sprintf("http://127.0.0.1:%d", pp)
	s, err := startProc("etcd", dir, "--name", "bench", "--data-dir", filepath.Join(dir, "data"), "--logger=zap",
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "bench="+purl)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{curl}, DialTimeout: 5 * time.Second})
	if err != nil {
		s.stop()
		return nil, nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return s, c, nil
		}
		if time.Now().After(deadline) {
			c.Close()
			s.stop()
			return nil, nil, fmt.Errorf("etcd did not start: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startRedises starts n redis-servers and returns them with one client each.
func startRedises(n int) ([]*server, []*goredislib.Client, error) {
	var (
		ss []*server
		cs []*goredislib.Client
	)
	fail := func(err error) ([]*server, []*goredislib.Client, error) {
		for _, c := range cs {
			c.Close()
		}
		for _, s := range ss {
			s.stop()
		}
		return nil, nil, err
	}
	for range n {
		p, err := freePort()
		if err != nil {
			return fail(err)
		}
		s, err := startProc("redis-server", "", "--port", strconv.Itoa(p), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no")
		if err != nil {
			return fail(err)
		}
		ss = append(ss, s)
		cs = append(cs, goredislib.NewClient(&goredislib.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)}))
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range cs {
		for c.Ping(context.Background()).Err() != nil {
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("redis-server did not start"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return ss, cs, nil
}

// roundTrip is the median latency of n sequential calls of f.
func roundTrip(n int, f func() error) time.Duration {
	var xs []time.Duration
	for range n {
		t0 := time.Now()
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, "round trip:", err)
		}
		xs = append(xs, time.Since(t0))
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// etcdImplementations: etcd's concurrency.Mutex first (the base of the
// ratios), then latchkey's etcdlock.
//
// A Mutex's key is <name>/<session lease>, so two holders of one name must
// not share a Session: the Mutex side keeps a free list of Sessions and each
// lock call takes one for as long as it holds (one Session per concurrent
// holder, created on first use and reused, as a service keeps one per worker).
func etcdImplementations(c *clientv3.Client) []impl {
	return []impl{
		{"etcd Mutex", func() (locker, error) {
			free := make(chan *concurrency.Session, 1024)
			var all []*concurrency.Session
			get := func() (*concurrency.Session, error) {
				select {
				case s := <-free:
					return s, nil
				default:
				}
				s, err := concurrency.NewSession(c, concurrency.WithTTL(int(ttl/time.Second)))
				if err != nil {
					return nil, err
				}
				all = append(all, s) // under mu
				return s, nil
			}
			var mu = make(chan struct{}, 1)
			return locker{
				lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
					mu <- struct{}{}
					s, err := get()
					<-mu
					if err != nil {
						return nil, err
					}
					m := concurrency.NewMutex(s, key)
					if err := m.Lock(ctx); err != nil {
						free <- s
						return nil, err
					}
					return func(ctx context.Context) error {
						err := m.Unlock(ctx)
						free <- s
						return err
					}, nil
				},
				close: func() {
					for _, s := range all {
						s.Close()
					}
				},
			}, nil
		}},
		{"latchkey etcdlock", func() (locker, error) {
			l, err := etcdlock.New(c)
			if err != nil {
				return locker{}, err
			}
			return managerLocker(l.Manager, func() { _ = l.Close() }), nil
		}},
	}
}

// redlockImplementations: redsync over 5 pools first (the base of the
// ratios), then latchkey's redlock over the same 5 servers.
func redlockImplementations(cs []*goredislib.Client) []impl {
	return []impl{
		{"redsync (5 nodes)", func() (locker, error) {
			var pools []redis.Pool
			for _, c := range cs {
				pools = append(pools, goredis.NewPool(c))
			}
			rs := redsync.New(pools...)
			return locker{
				lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
					m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1<<30),
						redsync.WithRetryDelayFunc(func(tries int) time.Duration { return backoff(tries - 1) }))
					if err := m.LockContext(ctx); err != nil {
						return nil, err
					}
					return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
				},
				close: func() {},
			}, nil
		}},
		{"latchkey redlock (5 nodes)", func() (locker, error) {
			var clients []redlock.Client
			for _, c := range cs {
				clients = append(clients, c)
			}
			l, err := redlock.New(clients)
			if err != nil {
				return locker{}, err
			}
			return managerLocker(l.Manager, func() { l.Close() }), nil
		}},
	}
}

func managerLocker(m *lock.Manager, closeFn func()) locker {
	return locker{
		lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			lease, err := m.Acquire(ctx, key, lock.WithTTL(ttl))
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		},
		close: closeFn,
	}
}

func etcdBench(ctx context.Context, prefix string, runs int, dur time.Duration) error {
	fmt.Fprintln(os.Stderr, "starting etcd ...")
	s, c, err := startEtcd()
	if err != nil {
		return err
	}
	defer s.stop()
	defer c.Close()
	rtt := roundTrip(1000, func() error { _, err := c.Get(ctx, "rtt"); return err })
	wrtt := roundTrip(1000, func() error { _, err := c.Put(ctx, "rtt", "x"); return err })
	fmt.Printf("\netcd: one private single-member etcd (%s); round trip (median of 1000): Get %s, Put %s\n",
		etcdVersion(ctx, c), us(rtt), us(wrtt))
	peerBench(ctx, etcdImplementations(c), prefix+"etcd/", runs, dur, rtt, "Get")
	return nil
}

func etcdVersion(ctx context.Context, c *clientv3.Client) string {
	st, err := c.Status(ctx, c.Endpoints()[0])
	if err != nil {
		return "version unknown"
	}
	return "server " + st.Version
}

func redlockBench(ctx context.Context, prefix string, runs int, dur time.Duration) error {
	fmt.Fprintln(os.Stderr, "starting 5 redis-servers ...")
	ss, cs, err := startRedises(5)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
		for _, s := range ss {
			s.stop()
		}
	}()
	rtt := roundTrip(1000, func() error {
		if err := cs[0].Get(ctx, "rtt").Err(); err != goredislib.Nil {
			return err
		}
		return nil
	})
	fmt.Printf("\nRedlock: 5 private redis-servers; GET round trip to one (median of 1000): %s\n", us(rtt))
	peerBench(ctx, redlockImplementations(cs), prefix+"redlock:", runs, dur, rtt, "GET")
	return nil
}

func us(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}
