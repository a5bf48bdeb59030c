package lockurl_test

import (
	"context"
	"fmt"
	"log"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

func ExampleOpen() {
	ctx := context.Background()
	// A program would read the URL from a flag or its configuration, e.g.
	// "sqlite:///var/lib/app/locks.db" or "postgres://app@db:5432/app".
	locker, err := lockurl.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = lock.Do(ctx, locker, "nightly-report", func(ctx context.Context, lease *lock.Lease) error {
		fmt.Println("holding", lease.Key())
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// holding nightly-report
	// err: <nil>
}
