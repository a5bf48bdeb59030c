package redisconsumer_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisconsumer"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
)

// A payment published twice (the producer retried after a timeout) is
// charged once; both entries are acknowledged.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addr := os.Getenv("LATCHKEY_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	prefix := fmt.Sprintf("example-redisstream:%d:", os.Getpid())
	stream := prefix + "payments"
	defer c.Del(context.Background(), stream, prefix+"{pay-1}", prefix+"{pay-2}")

	for _, id := range []string{"pay-1", "pay-1", "pay-2"} {
		if _, err := redisconsumer.Publish(ctx, c, stream, dedup.Message{ID: id, Body: []byte("100")}); err != nil {
			panic(err)
		}
	}

	d, err := dedup.New(redisstore.New(c, redisstore.WithPrefix(prefix)))
	if err != nil {
		panic(err)
	}
	handle := d.Wrap(func(ctx context.Context, m dedup.Message) error {
		fmt.Printf("charge %s: %s\n", m.ID, m.Body)
		if m.ID == "pay-2" {
			stop() // the last one: end the example
		}
		return nil
	})
	cons, err := redisconsumer.New(c, stream, "billing", "billing-1", handle,
		redisconsumer.WithBlock(100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	fmt.Println("run:", cons.Run(ctx))
	fmt.Println("pending:", c.XPending(context.Background(), stream, "billing").Val().Count)
	// Output:
	// charge pay-1: 100
	// charge pay-2: 100
	// run: context canceled
	// pending: 0
}
