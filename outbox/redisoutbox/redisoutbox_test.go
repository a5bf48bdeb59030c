package redisoutbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisconsumer"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/outbox"
	"github.com/latchkey-go/latchkey/outbox/redisoutbox"
)

// TestRelayToRedisStreams: a relay publishes 200 messages of 4 keys to a
// Redis stream, each twice (as a relay that died before its mark would),
// and a redisconsumer behind a Deduper takes each into effect once, in
// its key's order.
func TestRelayToRedisStreams(t *testing.T) {
	rdb, prefix := testsvc.RedisClient(t)
	stream := prefix + "payments"
	db := testsvc.OpenDB(t, "sqlite", backendurl.SQLiteDSN(filepath.Join(t.TempDir(), "app.db")), testsvc.MaxOpenConns(0))
	ob, err := outbox.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if _, err := ob.Add(t.Context(), db, outbox.Message{Topic: stream, Key: fmt.Sprintf("k%d", i%4), Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := redisoutbox.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	twice := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		return errors.Join(pub.Publish(ctx, m), pub.Publish(ctx, m))
	})
	e, _ := elect.New(memlock.New(), "relay")
	relay, err := outbox.NewRelay(ob, e, twice, outbox.WithPollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _ = relay.Run(ctx, "relay-1") })

	d, err := dedup.New(redisstore.New(rdb, redisstore.WithPrefix(prefix+"dedup:")))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := map[string]int64{}
	effects := 0
	done := make(chan struct{})
	c, err := redisconsumer.New(rdb, stream, "billing", "c1", d.Wrap(func(_ context.Context, m dedup.Message) error {
		mu.Lock()
		defer mu.Unlock()
		key := m.Header[outbox.HeaderKey]
		seq, _ := strconv.ParseInt(m.Header[outbox.HeaderSeq], 10, 64)
		if seq != last[key]+1 {
			t.Errorf("key %s: seq %d after %d", key, seq, last[key])
		}
		last[key] = seq
		if effects++; effects == n {
			close(done)
		}
		return nil
	}), redisconsumer.WithBlock(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = c.Run(ctx) })
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d messages took effect within 30 s", effects, n)
	}
	cancel()
	if l, _ := rdb.XLen(context.Background(), stream).Result(); l != 2*n {
		t.Errorf("stream holds %d entries, want %d: each message twice", l, 2*n)
	}
}
