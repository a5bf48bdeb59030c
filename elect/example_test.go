package elect_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// One instance runs the outbox relay; the term's token goes with every
// write it makes, so a resource that checks tokens refuses a deposed
// leader.
func ExampleElection_Run() {
	// In production: redislock, etcdlock, zklock or sqllock, one Locker per
	// process, all on the same server.
	locker := memlock.New()
	e, err := elect.New(locker, "outbox-relay", elect.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	err = e.Run(context.Background(), "host-a:8080", func(ctx context.Context, t *elect.Term) error {
		fmt.Println("leading as", t.Value())
		// Relay until ctx is done: it is cancelled the moment the term ends.
		return nil
	})
	fmt.Println("resigned:", err)
	// Output:
	// leading as host-a:8080
	// resigned: <nil>
}

// Campaign, proclaim a new value, and see who leads from another process.
func ExampleElection_Campaign() {
	ctx := context.Background()
	locker := memlock.New()
	e, _ := elect.New(locker, "scheduler")
	term, err := e.Campaign(ctx, "host-a")
	if err != nil {
		panic(err)
	}
	_ = term.Proclaim(ctx, "host-a (draining)")

	other, _ := elect.New(locker, "scheduler")
	l, _ := other.Leader(ctx)
	fmt.Println("leader:", l.Value, "same term:", l.Token == term.Token())
	if _, err := other.Campaign(ctx, "host-b", elect.WithWait(0)); errors.Is(err, lock.ErrNotAcquired) {
		fmt.Println("host-b: someone else leads")
	}
	_ = term.Resign(ctx)
	if _, err := other.Leader(ctx); errors.Is(err, elect.ErrNoLeader) {
		fmt.Println("no leader after the resign")
	}
	// Output:
	// leader: host-a (draining) same term: true
	// host-b: someone else leads
	// no leader after the resign
}

// Observe delivers the current leader first, then every change.
func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	locker := memlock.New()
	e, _ := elect.New(locker, "reconciler")
	changes, err := e.Observe(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("elected:", (<-changes).Elected)
	term, _ := e.Campaign(ctx, "host-a")
	fmt.Println("leader:", (<-changes).Value)
	_ = term.Resign(ctx)
	fmt.Println("elected:", (<-changes).Elected)
	// Output:
	// elected: false
	// leader: host-a
	// elected: false
}
