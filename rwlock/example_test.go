package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// Many readers of a price table share it; the writer that reprices it holds
// it alone, and while it waits no new reader gets in.
func Example() {
	ctx := context.Background()
	prices := memlock.NewRW() // redislock.NewRW(client), sqllock.NewPgxRW(ctx, pool), ...

	r1, _ := prices.RLock(ctx, "prices")
	r2, _ := prices.RLock(ctx, "prices") // readers share
	fmt.Println("two readers hold the table")

	// A writer waits for the readers to leave...
	written := make(chan uint64)
	go func() {
		w, err := prices.Lock(ctx, "prices", lock.WithTTL(10*time.Second))
		if err != nil {
			panic(err)
		}
		defer w.Release(ctx)
		written <- w.Token() // pass the token to the store it writes: it fences
	}()
	for prices.Writers().(*lock.Manager).Waiting("prices") == 0 {
		time.Sleep(time.Millisecond)
	}
	// ...and keeps new readers out meanwhile.
	_, err := prices.RLock(ctx, "prices", lock.WithWait(0))
	fmt.Println("a new reader while the writer waits:", errors.Is(err, lock.ErrNotAcquired))

	r1.Release(ctx)
	r2.Release(ctx)
	token := <-written
	fmt.Println("the writer's token is above the readers':", token > r2.Token())
	// Output:
	// two readers hold the table
	// a new reader while the writer waits: true
	// the writer's token is above the readers': true
}

// Inspect tells an operator who holds a name: the command-line view is
// latchkey lock show --rw NAME.
func Example_inspect() {
	ctx := context.Background()
	prices := memlock.NewRW()
	r, _ := prices.RLock(ctx, "prices", lock.WithHolder("report job"))
	defer r.Release(ctx)

	info, _ := prices.Inspect(ctx, "prices")
	fmt.Println("writer:", info.Writer != nil)
	for _, h := range info.Readers {
		fmt.Printf("reader %q, token above 0: %v\n", h.Label, h.Token > 0)
	}
	// Output:
	// writer: false
	// reader "report job", token above 0: true
}

// Readers and Writers are lock.Lockers, so lock.Do runs work under either
// mode and cancels it if the lease is lost.
func Example_readers() {
	ctx := context.Background()
	prices := memlock.NewRW()
	err := lock.Do(ctx, prices.Readers(), "prices", func(ctx context.Context, lease *lock.Lease) error {
		fmt.Println("reading under a shared lease")
		return nil
	})
	fmt.Println(err)
	// Output:
	// reading under a shared lease
	// <nil>
}
