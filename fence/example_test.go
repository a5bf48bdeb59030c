package fence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// *lock.Lease is a fence.Holder: a lock holder passes its lease.
var _ fence.Holder = (*lock.Lease)(nil)

// account is an in-process resource that keeps the highest token it applied,
// next to its data, under one mutex.
type account struct {
	mu      sync.Mutex
	balance int
	highest uint64
}

func (a *account) set(h fence.Holder, balance int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := fence.Check(a.highest, h); err != nil {
		return err
	}
	a.balance, a.highest = balance, h.Token()
	return nil
}

// The fencing rule, for a resource guarded by a mutex: the holder of a newer
// lease wins, a paused older holder is refused.
func ExampleCheck() {
	ctx := context.Background()
	locker := memlock.New()
	acct := &account{}

	old, _ := locker.Acquire(ctx, "account:7")
	_ = acct.set(old, 100)
	locker.Revoke("account:7") // old's lease is lost while its holder sleeps

	next, _ := locker.Acquire(ctx, "account:7")
	defer next.Release(ctx)
	_ = acct.set(next, 250)

	err := acct.set(old, 0) // the old holder wakes up and writes
	fmt.Println(errors.Is(err, fence.ErrStale), acct.balance)
	// Output: true 250
}

// A token that travelled without its lease is passed as a fence.Token.
func ExampleToken() {
	acct := &account{}
	fmt.Println(acct.set(fence.Token(7), 1))
	fmt.Println(acct.set(fence.Token(7), 2)) // same holder, again: fine
	fmt.Println(errors.Is(acct.set(fence.Token(6), 3), fence.ErrStale), acct.balance)
	// Output:
	// <nil>
	// <nil>
	// true 2
}
