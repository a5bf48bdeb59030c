package main

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"sync/atomic"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// ttl is the lease every implementation asks for.
const ttl = 30 * time.Second

// A locker is one implementation, opened: lock blocks until key is held;
// try, if set, is how its users take a lock they expect free (the
// uncontended test), and lock stands in for it otherwise.
type locker struct {
	lock   func(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	try    func(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	close  func()
	stalls *atomic.Int64 // lock calls that hit stallAfter
}

type impl struct {
	name string
	open func() (locker, error)
}

// Polling peers retry with the same jittered exponential backoff,
// 1 ms doubling to 32 ms.
func backoff(n int) time.Duration {
	d := time.Millisecond << min(n, 5)
	return d/2 + rand.N(d/2+1)
}

func newGoRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr})
}

func token() string {
	var b [16]byte
	_, _ = cryptorand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var rawRelease = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)

func implementations(addr string) []impl {
	return []impl{
		{"raw go-redis", func() (locker, error) {
			c := newGoRedis(addr)
			return locker{
				lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
					v := token()
					for n := 0; ; n++ {
						ok, err := c.SetNX(ctx, key, v, ttl).Result()
						if err != nil {
							return nil, err
						}
						if ok {
							break
						}
						time.Sleep(backoff(n))
					}
					return func(ctx context.Context) error { return rawRelease.Run(ctx, c, []string{key}, v).Err() }, nil
				},
				close: func() { c.Close() },
			}, nil
		}},
		{"redislock", func() (locker, error) {
			c := newGoRedis(addr)
			rl := bsm.New(c)
			return locker{
				lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
					l, err := rl.Obtain(ctx, key, ttl, &bsm.Options{RetryStrategy: &retries{}})
					if err != nil {
						return nil, err
					}
					return l.Release, nil
				},
				close: func() { c.Close() },
			}, nil
		}},
		{"redsync", func() (locker, error) {
			c := newGoRedis(addr)
			rs := redsync.New(goredis.NewPool(c))
			return locker{
				lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
					m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1<<30),
						redsync.WithRetryDelayFunc(func(tries int) time.Duration { return backoff(tries - 1) }))
					if err := m.LockContext(ctx); err != nil {
						return nil, err
					}
					return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
				},
				close: func() { c.Close() },
			}, nil
		}},
		{"rueidislock", func() (locker, error) {
			l, err := rueidislock.NewLocker(rueidislock.LockerOption{
				ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
				KeyMajority:    1,
				KeyValidity:    ttl,
				NoLoopTracking: true,
			})
			if err != nil {
				return locker{}, err
			}
			return locker{
				lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
					_, cancel, err := l.WithContext(ctx, key)
					if err != nil {
						return nil, err
					}
					return func(context.Context) error { cancel(); return nil }, nil
				},
				close: l.Close,
			}, nil
		}},
		{"latchkey", func() (locker, error) { return openLatchkey(addr) }},
		{"latchkey-unbatched", func() (locker, error) { return openLatchkey(addr, redislock.WithBatching(false)) }},
	}
}

func openLatchkey(addr string, opts ...redislock.Option) (locker, error) {
	c := newGoRedis(addr)
	l, err := redislock.New(c, opts...)
	if err != nil {
		return locker{}, err
	}
	lk := latchkeyLocker(l)
	lk.close = func() { l.Close(); c.Close() }
	return lk, nil
}

// openLatchkeyFullDuplex is latchkey with its own batching off, sending
// through go-redis's full-duplex automatic pipelining (go-redis 9.22 and
// later, experimental there): one held connection with a writer and a
// reader streaming every caller's commands, the design rueidis has. A
// measurement of where a streaming transport would take the lock, not a
// way users call it.
func openLatchkeyFullDuplex(addr string) (locker, error) {
	c := newGoRedis(addr)
	cfg := redis.DefaultBlockingAutoPipelineOptions()
	cfg.FullDuplex = true
	ap, err := c.AutoPipelineWithOptions(cfg)
	if err != nil {
		c.Close()
		return locker{}, err
	}
	l, err := redislock.New(ap, redislock.WithBatching(false))
	if err != nil {
		c.Close()
		return locker{}, err
	}
	lk := latchkeyLocker(l)
	lk.close = func() { l.Close(); c.Close() }
	return lk, nil
}

// latchkeyLocker is l as the benchmark calls it; its close closes l only.
func latchkeyLocker(l *redislock.Locker) locker {
	// As users call it: default options (the lease is lock.DefaultTTL, the
	// peers' ttl), and WithWait(0) where the lock is expected free, which
	// skips the waiting machinery (the release subscription, the Manager's
	// queue) that a call allowed to wait sets up first.
	acquire := func(opts ...lock.Option) func(context.Context, string) (func(context.Context) error, error) {
		return func(ctx context.Context, key string) (func(context.Context) error, error) {
			lease, err := l.Acquire(ctx, key, opts...)
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		}
	}
	return locker{
		lock:  acquire(),
		try:   acquire(lock.WithWait(0)),
		close: func() { l.Close() },
	}
}

// retries adapts backoff to bsm/redislock's RetryStrategy, one per Obtain.
type retries struct{ n int }

func (r *retries) NextBackoff() time.Duration { r.n++; return backoff(r.n - 1) }
