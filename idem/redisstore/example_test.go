package redisstore_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/redisstore"
)

// Any go-redis client fits: *redis.Client, *redis.ClusterClient, a
// UniversalClient.
func ExampleNew() {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	store := redisstore.New(rdb, redisstore.WithPrefix("payments:idem:"))
	v, err := idem.Do(context.Background(), store, "order-1001/pay", func(context.Context) (string, error) {
		return "ch_1", nil
	})
	fmt.Println(v, err)
}

// A service whose first requests come in bursts from many goroutines can
// trade a little latency for throughput with fewer, larger pipelines.
func ExampleWithSendsInFlight() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	store := redisstore.New(rdb, redisstore.WithSendsInFlight(1))
	_, err := idem.Do(context.Background(), store, "order-1002/pay", func(context.Context) (string, error) {
		return "ch_2", nil
	})
	fmt.Println(err)
}
