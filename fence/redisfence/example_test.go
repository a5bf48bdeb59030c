package redisfence_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/redisfence"
)

// A holder writes with its lease (any fence.Holder); a former holder's late
// write is refused by the script. It needs a Redis at localhost:6379.
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	guard, _ := redisfence.New(client)

	key := "example:redisfence:order:7"
	tokenKey, _ := guard.TokenKey(key)
	defer client.Del(ctx, key, tokenKey)

	old, next := fence.Token(41), fence.Token(42) // e.g. two leases of one lock key
	fmt.Println(guard.HSet(ctx, old, key, "status", "PENDING"))
	fmt.Println(guard.HSet(ctx, next, key, "status", "PAID"))
	err := guard.HSet(ctx, old, key, "status", "FAILED") // the old holder wakes up
	fmt.Println(errors.Is(err, fence.ErrStale), client.HGet(ctx, key, "status").Val(), tokenKey)
	// Output:
	// <nil>
	// <nil>
	// true PAID {example:redisfence:order:7}:fence
}

// The read of a read-modify-write claims the key: the holder's token is on
// the key before the value is read, so a paused former holder that wakes
// between this read and the write is refused. It needs a Redis at
// localhost:6379.
func ExampleGuard_Read() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()
	guard, _ := redisfence.New(client)

	key := "example:redisfence:balance:7"
	tokenKey, _ := guard.TokenKey(key)
	defer client.Del(ctx, key, tokenKey)
	client.Set(ctx, key, 1000, 0)

	old, next := fence.Token(41), fence.Token(42) // e.g. two leases of one lock key
	seen, _ := guard.Read(ctx, old, key)          // "1000"; then old's holder pauses
	balance, _ := guard.Read(ctx, next, key)      // "1000", and next's token is on the key
	fmt.Println(seen, balance)

	err := guard.Set(ctx, old, key, 900, 0) // old wakes up: 1000 - 100
	fmt.Println(errors.Is(err, fence.ErrStale))
	fmt.Println(guard.Set(ctx, next, key, 700, 0), client.Get(ctx, key).Val()) // 1000 - 300
	// Output:
	// 1000 1000
	// true
	// <nil> 700
}
