package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/semaphore"
)

// At most two report jobs at once: a third is refused while two run.
func Example() {
	ctx := context.Background()
	client := memlock.NewSemaphores() // lock/redislock, lock/sqllock: across processes
	reports, err := client.Semaphore("heavy-reports", 2)
	if err != nil {
		panic(err)
	}
	first, _ := reports.Acquire(ctx, lock.WithTTL(time.Minute))
	second, _ := reports.Acquire(ctx, lock.WithTTL(time.Minute))
	_, err = reports.Acquire(ctx, lock.WithWait(0))
	fmt.Println("third:", errors.Is(err, lock.ErrNotAcquired))
	fmt.Println("tokens increase:", second.Token() > first.Token())
	_ = first.Release(ctx)
	third, err := reports.Acquire(ctx, lock.WithWait(0))
	fmt.Println("after a release:", err)
	_ = second.Release(ctx)
	_ = third.Release(ctx)
	// Output:
	// third: true
	// tokens increase: true
	// after a release: <nil>
}

// Do runs a call to a rate-limited provider under one of its four permits;
// the call's context is cancelled if the permit is lost.
func ExampleSemaphore_Do() {
	ctx := context.Background()
	provider, _ := memlock.NewSemaphores().Semaphore("payment-provider", 4)
	err := provider.Do(ctx, func(ctx context.Context, p *semaphore.Permit) error {
		fmt.Println("calling the provider with", p.Count(), "permit of", provider.Permits())
		return nil
	}, lock.WithTTL(10*time.Second))
	fmt.Println(err)
	// Output:
	// calling the provider with 1 permit of 4
	// <nil>
}

// A party that disagrees on the permit count is refused, not merged.
func ExampleMismatchError() {
	ctx := context.Background()
	client := memlock.NewSemaphores()
	four, _ := client.Semaphore("payment-provider", 4)
	held, _ := four.Acquire(ctx)
	defer held.Release(ctx)
	five, _ := client.Semaphore("payment-provider", 5)
	_, err := five.Acquire(ctx, lock.WithWait(0))
	fmt.Println(err)
	// Output:
	// lock: acquire: semaphore: permit count differs from the holders': asked with 5 permits, held with 4
}
