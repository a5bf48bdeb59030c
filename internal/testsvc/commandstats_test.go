package testsvc_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// A script's commands are counted twice by the commandstats sum and once by
// the sent commands' time: a script of three SETs and a plain GET are five
// commands run, two sent; the sent time is the script's and the GET's.
func TestServerCostCountsScriptsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testsvc.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	sent := testsvc.CountCommands(c)
	before, err := testsvc.ReadCommandStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	sent0 := sent.Counts()
	const script = "redis.call('SET', KEYS[1], 'a') redis.call('SET', KEYS[1], 'b') redis.call('SET', KEYS[1], 'c') return 1"
	if err := c.Eval(ctx, script, []string{"k"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "k").Err(); err != nil {
		t.Fatal(err)
	}
	after, err := testsvc.ReadCommandStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	cost := after.Since(before, sent.Since(sent0))
	if cost.Calls != 5 || cost.TopCalls != 2 {
		t.Errorf("calls %d, sent %d; want 5 and 2", cost.Calls, cost.TopCalls)
	}
	if !(cost.TopMicros > 0 && cost.TopMicros < cost.Micros) {
		t.Errorf("sent commands' time %v µs, summed %v µs; want the first positive and below the second", cost.TopMicros, cost.Micros)
	}
	if cost.CPUMicros <= 0 {
		t.Errorf("server CPU %v µs, want positive", cost.CPUMicros)
	}
	t.Logf("%+v", cost)
}
