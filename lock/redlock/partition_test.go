package redlock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// TestSilentNodeCostsOnlyTheNodeTimeout: one node of five goes silent (a
// partition: its packets vanish, no reset), and the clients are go-redis's
// defaults, which ignore a context's deadline and wait out their own 3 s read
// timeout. A try-once Acquire of a free key must still take the other four
// within the per-node timeout (TTL/10 = 200 ms), not wait for the silent node
// until its client gives up, and not fail for it.
func TestSilentNodeCostsOnlyTheNodeTimeout(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	proxy := testsvc.NewProxy(t, c.srv[0].Addr())
	var clients []Client
	for i, s := range c.srv {
		addr := s.Addr()
		if i == 0 {
			addr = proxy.Addr()
		}
		rc := redis.NewClient(&redis.Options{Addr: addr}) // defaults, as users write them
		t.Cleanup(func() { _ = rc.Close() })
		if err := rc.Ping(ctxT(t)).Err(); err != nil { // a pooled connection, open before the cut
			t.Fatal(err)
		}
		clients = append(clients, rc)
	}
	l, err := New(clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	proxy.Blackhole(true)

	const ttl = 2 * time.Second
	readTimeout := 3 * time.Second // go-redis's default
	for _, key := range []string{"silent-a", "silent-b"} {
		start := time.Now()
		lease, err := l.Acquire(ctxT(t), key, lock.WithTTL(ttl), lock.WithWait(0))
		took := time.Since(start)
		t.Logf("try-once Acquire with a silent node: %v, %v", took.Round(time.Millisecond), err)
		if err != nil {
			t.Fatalf("Acquire of a free key with 4 of 5 nodes answering: %v (after %v)", err, took)
		}
		if took >= readTimeout {
			t.Fatalf("Acquire took %v: it waited for the silent node's client, not the per-node timeout %v", took, ttl/10)
		}
		start = time.Now()
		if err := lease.Release(ctxT(t)); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if took := time.Since(start); took >= readTimeout {
			t.Fatalf("Release took %v, waiting for the silent node", took)
		}
	}
}
