package redisstore_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
)

// A consumer's handler behind a Redis deduplicator: the second delivery of
// the same message id is acknowledged without running the handler.
func Example() {
	ctx := context.Background()
	addr := os.Getenv("LATCHKEY_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	prefix := "example-redisdedup:" + fmt.Sprint(os.Getpid()) + ":"
	defer c.Del(ctx, prefix+"{msg-42}")

	d, err := dedup.New(redisstore.New(c, redisstore.WithPrefix(prefix)))
	if err != nil {
		panic(err)
	}
	runs := 0
	handle := d.Wrap(func(ctx context.Context, m dedup.Message) error {
		runs++
		return nil
	})
	for range 2 {
		fmt.Println(handle(ctx, dedup.Message{ID: "msg-42"}))
	}
	fmt.Println("runs:", runs)
	// Output:
	// <nil>
	// <nil>
	// runs: 1
}
