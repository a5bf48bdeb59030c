package bloomfilter_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
)

func redisAddr() string {
	if a := os.Getenv("LATCHKEY_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// A filter for a million ids a day at 1%: its shape, and a check-and-add.
func Example() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer c.Close()
	f, err := bloomfilter.New(c, "views", 1_000_000, 0.01,
		bloomfilter.WithPrefix(fmt.Sprintf("example-bloom:%d:", os.Getpid())))
	if err != nil {
		panic(err)
	}
	defer c.Del(ctx, f.Keys()...)

	s := f.Sizing()
	fmt.Printf("%d bits (%.1f KiB) and %d hashes per generation, %.2f bits per id\n",
		s.Bits, float64(s.Bits)/8/1024, s.Hashes, s.BitsPerID())
	for range 2 {
		seen, err := f.TestAndAdd(ctx, "page-7/user-42")
		fmt.Println(seen, err)
	}
	// Output:
	// 11029594 bits (1346.4 KiB) and 8 hashes per generation, 11.03 bits per id
	// false <nil>
	// true <nil>
}

// The prefilter in front of the exact Redis store: the exact store decides
// every claim, so a false positive costs a lookup, never a message.
func ExampleNewPrefilter() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer c.Close()
	prefix := fmt.Sprintf("example-prefilter:%d:", os.Getpid())
	f, err := bloomfilter.New(c, "payments", 100_000, 0.01, bloomfilter.WithPrefix(prefix))
	if err != nil {
		panic(err)
	}
	exact := redisstore.New(c, redisstore.WithPrefix(prefix))
	defer c.Del(ctx, append(f.Keys(), exact.RecordKey("pay-1"))...)

	d, err := dedup.New(bloomfilter.NewPrefilter(f, exact))
	if err != nil {
		panic(err)
	}
	charges := 0
	handle := d.Wrap(func(context.Context, dedup.Message) error { charges++; return nil })
	for range 3 {
		_ = handle(ctx, dedup.Message{ID: "pay-1"})
	}
	fmt.Println("charges:", charges)
	// Output:
	// charges: 1
}

// The filter alone as a dedup store, for messages that may be lost: a
// redelivery is recognised by its bits; a genuinely new message is dropped
// with probability up to the configured rate.
func ExampleNewLossy() {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer c.Close()
	f, err := bloomfilter.New(c, "views", 1_000_000, 0.01,
		bloomfilter.WithPrefix(fmt.Sprintf("example-lossy:%d:", os.Getpid())))
	if err != nil {
		panic(err)
	}
	defer c.Del(ctx, f.Keys()...)

	d, err := dedup.New(bloomfilter.NewLossy(f))
	if err != nil {
		panic(err)
	}
	views := 0
	handle := d.Wrap(func(context.Context, dedup.Message) error { views++; return nil })
	for range 3 {
		_ = handle(ctx, dedup.Message{ID: "page-7/user-42"})
	}
	fmt.Println("views counted:", views)
	// Output:
	// views counted: 1
}
