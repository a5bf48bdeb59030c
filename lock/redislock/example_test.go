package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// The examples use the Redis at 127.0.0.1:6379, which CI provides.

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locker, err := redislock.New(rdb, redislock.WithPrefix("example:lock:"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "order:42", lock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	// Someone else cannot take it meanwhile, and learns how long the
	// holder's lease has left (for a Retry-After).
	_, err = locker.Acquire(ctx, "order:42", lock.WithWait(0))
	var held *lock.HeldError
	fmt.Println("second Acquire:", errors.Is(err, lock.ErrNotAcquired), errors.As(err, &held) && held.TimeLeft <= 10*time.Second)

	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", lease.Err())
	// Output:
	// second Acquire: true true
	// released: lock: lease released
}

func ExampleLocker_Acquire_token() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locker, err := redislock.New(rdb, redislock.WithPrefix("example:lock:"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	first, err := locker.Acquire(ctx, "ledger:7")
	if err != nil {
		log.Fatal(err)
	}
	_ = first.Release(ctx)
	second, err := locker.Acquire(ctx, "ledger:7")
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	// Writes to the ledger carry the token; the ledger refuses any token
	// lower than one it has seen, so a holder that lost its lease unknowingly
	// cannot overwrite its successor's work.
	fmt.Println("tokens rise:", second.Token() > first.Token())
	// Output:
	// tokens rise: true
}

func ExampleNew_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
	})
	defer rdb.Close()
	locker, err := redislock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	// Use locker as with one server: each lock's keys share a hash tag.
}

func Example_do() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locker, err := redislock.New(rdb, redislock.WithPrefix("example:lock:"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	// Do holds the lock while fn runs, renews it, cancels fn's context if the
	// lease is lost, and releases it afterwards.
	err = lock.Do(ctx, locker, "cron:nightly-report", func(ctx context.Context, lease *lock.Lease) error {
		fmt.Println("running with a fencing token:", lease.Token() > 0)
		return nil
	})
	fmt.Println("lost:", errors.Is(err, lock.ErrLeaseLost), "err:", err)
	// Output:
	// running with a fencing token: true
	// lost: false err: <nil>
}

// At most 4 concurrent calls to a rate-limited payment provider, across
// every instance that shares the Redis.
func ExampleNewSemaphores() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	sems, err := redislock.NewSemaphores(rdb, redislock.WithPrefix("example:sem:"))
	if err != nil {
		log.Fatal(err)
	}
	defer sems.Close()
	provider, err := sems.Semaphore("payment-provider", 4)
	if err != nil {
		log.Fatal(err)
	}
	three, err := provider.AcquireN(ctx, 3, lock.WithTTL(10*time.Second), lock.WithHolder("batch job"))
	if err != nil {
		log.Fatal(err)
	}
	one, err := provider.Acquire(ctx, lock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	_, err = provider.Acquire(ctx, lock.WithWait(0))
	fmt.Println("a fifth call:", errors.Is(err, lock.ErrNotAcquired))

	info, err := sems.Inspect(ctx, "payment-provider")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("N %d, %d used by %d holders\n", info.Permits, info.Used, len(info.Holders))
	_ = one.Release(ctx)
	_ = three.Release(ctx)
	// Output:
	// a fifth call: true
	// N 4, 4 used by 2 holders
}
