package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredislib "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/lock/redislock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// The election table measures, per backend and next to etcd's
// concurrency.Election in the same run:
//
//   - resign hand-over: the leader resigns while a second candidate (its own
//     client, as another process) waits; from the Resign call to the
//     candidate's Campaign returning elected.
//   - failover: the leader dies (its client is closed without resigning,
//     which the server sees as a SIGKILL: no release, no more renewals)
//     right after it was elected; from the death to the waiting candidate's
//     Campaign returning elected. The term's lease had its whole TTL left,
//     so this is TTL plus what the backend adds.

// A candidate is one campaigning process: its own client and election.
type candidate interface {
	campaign(ctx context.Context) error
	resign(ctx context.Context) error
	die() // stop without resigning, as a killed process does
}

// An electImpl makes candidates of one backend, with term length ttl.
type electImpl struct {
	name string
	ttl  time.Duration
	new  func(name string) (candidate, error)
}

// latchkeyCandidate is a candidate of package elect on a Locker of its own.
type latchkeyCandidate struct {
	e     *elect.Election
	term  *elect.Term
	close func()
}

func (c *latchkeyCandidate) campaign(ctx context.Context) error {
	t, err := c.e.Campaign(ctx, "bench")
	c.term = t
	return err
}

func (c *latchkeyCandidate) resign(ctx context.Context) error { return c.term.Resign(ctx) }
func (c *latchkeyCandidate) die()                             { c.close() }

func latchkeyImpl(name string, ttl time.Duration, open func() (lock.Locker, func(), error)) electImpl {
	return electImpl{name: name, ttl: ttl, new: func(key string) (candidate, error) {
		l, closeFn, err := open()
		if err != nil {
			return nil, err
		}
		e, err := elect.New(l, key, elect.WithTTL(ttl))
		if err != nil {
			closeFn()
			return nil, err
		}
		return &latchkeyCandidate{e: e, close: closeFn}, nil
	}}
}

// etcdCandidate is etcd's concurrency.Election on a client and session of
// its own.
type etcdCandidate struct {
	c *clientv3.Client
	s *concurrency.Session
	e *concurrency.Election
}

func (c *etcdCandidate) campaign(ctx context.Context) error { return c.e.Campaign(ctx, "bench") }
func (c *etcdCandidate) resign(ctx context.Context) error   { return c.e.Resign(ctx) }
func (c *etcdCandidate) die()                               { _ = c.c.Close() }

func electImplementations(ctx context.Context, redisAddr, pgURL, etcdURL string) []electImpl {
	const ttl = time.Second
	// etcd leases are whole seconds, at least 2 s by default.
	const etcdTTL = 2 * time.Second
	etcdClient := func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 5 * time.Second})
	}
	impls := []electImpl{
		{"etcd Election", etcdTTL, func(key string) (candidate, error) {
			c, err := etcdClient()
			if err != nil {
				return nil, err
			}
			s, err := concurrency.NewSession(c, concurrency.WithTTL(int(etcdTTL/time.Second)))
			if err != nil {
				c.Close()
				return nil, err
			}
			return &etcdCandidate{c: c, s: s, e: concurrency.NewElection(s, key)}, nil
		}},
		latchkeyImpl("latchkey etcd", etcdTTL, func() (lock.Locker, func(), error) {
			c, err := etcdClient()
			if err != nil {
				return nil, nil, err
			}
			l, err := etcdlock.New(c)
			if err != nil {
				c.Close()
				return nil, nil, err
			}
			return l, func() { _ = c.Close() }, nil
		}),
		latchkeyImpl("latchkey Redis", ttl, func() (lock.Locker, func(), error) {
			c := goredislib.NewClient(&goredislib.Options{Addr: redisAddr})
			l, err := redislock.New(c)
			if err != nil {
				c.Close()
				return nil, nil, err
			}
			return l, func() { _ = c.Close() }, nil
		}),
	}
	if pgURL != "" {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		p, err := pgxpool.New(pctx, pgURL)
		if err == nil {
			err = p.Ping(pctx)
			p.Close()
		}
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "election table: PostgreSQL left out: %v\n", err)
		} else {
			impls = append(impls, latchkeyImpl("latchkey PostgreSQL", ttl, func() (lock.Locker, func(), error) {
				p, err := pgxpool.New(ctx, pgURL)
				if err != nil {
					return nil, nil, err
				}
				l, err := sqllock.NewPgx(ctx, p)
				if err != nil {
					p.Close()
					return nil, nil, err
				}
				return l, func() { _ = l.Close(); p.Close() }, nil
			}))
		}
	}
	return impls
}

// electResult is one implementation's hand-over and failover times.
type electResult struct {
	handover, failover []time.Duration
}

// handovers measures n resign hand-overs between two candidates.
func handovers(ctx context.Context, im electImpl, key string, n int) ([]time.Duration, error) {
	x, err := im.new(key)
	if err != nil {
		return nil, err
	}
	defer x.die()
	y, err := im.new(key)
	if err != nil {
		return nil, err
	}
	defer y.die()
	if err := x.campaign(ctx); err != nil {
		return nil, err
	}
	var out []time.Duration
	// One round more than measured: the first also opens each candidate's
	// subscription or watch stream.
	for i := range n + 1 {
		elected := make(chan error, 1)
		var at time.Time
		go func() {
			err := y.campaign(ctx)
			at = time.Now()
			elected <- err
		}()
		time.Sleep(50 * time.Millisecond) // y waits behind x
		start := time.Now()
		if err := x.resign(ctx); err != nil {
			return nil, err
		}
		if err := <-elected; err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, at.Sub(start))
		}
		x, y = y, x
	}
	return out, x.resign(ctx)
}

// failovers measures n failovers: each round a new leader dies right after
// its election and a new candidate waits.
func failovers(ctx context.Context, im electImpl, key string, n int) ([]time.Duration, error) {
	var out []time.Duration
	for range n {
		leader, err := im.new(key)
		if err != nil {
			return nil, err
		}
		if err := leader.campaign(ctx); err != nil {
			leader.die()
			return nil, err
		}
		next, err := im.new(key)
		if err != nil {
			leader.die()
			return nil, err
		}
		elected := make(chan error, 1)
		var at time.Time
		go func() {
			err := next.campaign(ctx)
			at = time.Now()
			elected <- err
		}()
		time.Sleep(20 * time.Millisecond) // next waits behind the leader
		died := time.Now()
		leader.die()
		select {
		case err = <-elected:
		case <-time.After(10 * im.ttl):
			err = errors.New("no new leader within 10 TTLs")
		}
		if err != nil {
			next.die()
			return nil, err
		}
		out = append(out, at.Sub(died))
		_ = next.resign(ctx)
		next.die()
	}
	return out, nil
}

func pct(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)*p/100, len(s)-1)]
}

// electBench prints the election table; it starts a private etcd.
func electBench(ctx context.Context, redisAddr, pgURL, prefix string, handN, failN int) error {
	srv, c, err := startEtcd()
	if err != nil {
		return err
	}
	defer srv.stop()
	eps := c.Endpoints()
	version := etcdVersion(ctx, c)
	c.Close()
	defer func() {
		// The Redis rows' fencing counters, which would outlive the run.
		c := goredislib.NewClient(&goredislib.Options{Addr: redisAddr})
		defer c.Close()
		iter := c.Scan(ctx, 0, "latchkey:lock:{"+prefix+"elect-*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	}()
	impls := electImplementations(ctx, redisAddr, pgURL, eps[0])
	if zk, addr, err := startZooKeeper(); err != nil {
		fmt.Fprintf(os.Stderr, "election table: ZooKeeper left out: %v\n", err)
	} else {
		defer zk.stop()
		impls = append(impls, zkImpl(ctx, addr))
	}
	res := make([]electResult, len(impls))
	for i, im := range impls {
		fmt.Fprintf(os.Stderr, "election: %s ...\n", im.name)
		h, err := handovers(ctx, im, prefix+"elect-handover-"+im.name, handN)
		if err != nil {
			return fmt.Errorf("%s: hand-over: %w", im.name, err)
		}
		f, err := failovers(ctx, im, prefix+"elect-failover-"+im.name, failN)
		if err != nil {
			return fmt.Errorf("%s: failover: %w", im.name, err)
		}
		res[i] = electResult{handover: h, failover: f}
	}
	fmt.Printf("\nLeader election (%d resign hand-overs, %d failovers each; TTL %v on etcd, %v elsewhere (ZooKeeper: the session timeout, checked every 500 ms); private etcd %s):\n\n",
		handN, failN, impls[0].ttl, time.Second, version)
	fmt.Print("| |")
	for _, im := range impls {
		fmt.Printf(" %s |", im.name)
	}
	fmt.Print("\n|---|")
	for range impls {
		fmt.Print("---|")
	}
	fmt.Println()
	// Each cell after the first (etcd's Election) states its ratio to it.
	row := func(label string, f func(r electResult) time.Duration) {
		fmt.Printf("| %s |", label)
		base := f(res[0])
		for i, r := range res {
			d := f(r)
			if i == 0 || base <= 0 {
				fmt.Printf(" %s |", ms(d))
				continue
			}
			fmt.Printf(" %s (%.2fx) |", ms(d), float64(d)/float64(base))
		}
		fmt.Println()
	}
	row("resign hand-over p50", func(r electResult) time.Duration { return pct(r.handover, 50) })
	row("resign hand-over p99", func(r electResult) time.Duration { return pct(r.handover, 99) })
	row("failover p50", func(r electResult) time.Duration { return pct(r.failover, 50) })
	row("failover p99", func(r electResult) time.Duration { return pct(r.failover, 99) })
	fmt.Println("\nFailover counts from the leader's death right after its election, when its term had its whole TTL left.")
	return nil
}
