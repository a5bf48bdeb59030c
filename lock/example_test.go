package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// Acquire a lock, pass its fencing token to the resource, release it.
func Example() {
	ctx := context.Background()
	var locker lock.Locker = memlock.New() // or sqllock, redislock, ...

	lease, err := locker.Acquire(ctx, "inventory:sku-42", lock.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	defer lease.Release(ctx)

	// Hand the token to the storage you write to, so it can refuse a write
	// from a holder whose lease has passed to someone else.
	fmt.Println("holding", lease.Key(), "token > 0:", lease.Token() > 0)
	// Output: holding inventory:sku-42 token > 0: true
}

// Do runs a function under the lock; its context is cancelled if the lease
// is lost, and the lock is released afterwards.
func ExampleDo() {
	ctx := context.Background()
	locker := memlock.New()

	err := lock.Do(ctx, locker, "account:7", func(ctx context.Context, lease *lock.Lease) error {
		// ... transfer money, checking ctx between steps ...
		return ctx.Err()
	})
	fmt.Println("err:", err)
	// Output: err: <nil>
}

// WithWait(0) tries exactly once: a held lock answers ErrNotAcquired at once.
func ExampleWithWait() {
	ctx := context.Background()
	locker := memlock.New()

	cron, _ := locker.Acquire(ctx, "cron:nightly-report")
	defer cron.Release(ctx)

	_, err := locker.Acquire(ctx, "cron:nightly-report", lock.WithWait(0))
	fmt.Println(errors.Is(err, lock.ErrNotAcquired))
	// Output: true
}

// A lease's Done channel closes when the lock can no longer be trusted.
func ExampleLease_Done() {
	ctx := context.Background()
	locker := memlock.New()

	lease, _ := locker.Acquire(ctx, "job:1", lock.WithTTL(50*time.Millisecond), lock.WithFixedTTL())
	<-lease.Done() // a fixed lease simply expires
	fmt.Println(errors.Is(lease.Err(), lock.ErrLeaseLost))
	fmt.Println(errors.Is(lease.Release(ctx), lock.ErrNotHeld))
	// Output:
	// true
	// true
}
