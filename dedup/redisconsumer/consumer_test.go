package redisconsumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
	"github.com/latchkey-go/latchkey/dedup/internal/consumetest"
	"github.com/latchkey-go/latchkey/dedup/redisconsumer"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// newClient connects to the shared Redis and deletes the test's keys when it
// ends.
func newClient(t *testing.T) (*redis.Client, string) { return testsvc.RedisClient(t) }

func pending(t *testing.T, c *redis.Client, stream, group string) int64 {
	t.Helper()
	p, err := c.XPending(context.Background(), stream, group).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

// A failing handler leaves the entry pending; the consumer reclaims it after
// the min-idle time and the retry takes effect once.
func TestFailureIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := newClient(t)
	stream := prefix + "s"
	if _, err := redisconsumer.Publish(ctx, c, stream, dedup.Message{ID: "m1"}); err != nil {
		t.Fatal(err)
	}
	d, err := dedup.New(redisstore.New(c, redisstore.WithPrefix(prefix+"d:")))
	if err != nil {
		t.Fatal(err)
	}
	rec := &consumetest.Recorder{Fails: 2}
	log := &deduptest.ErrorLog{}
	cons, err := redisconsumer.New(c, stream, "g", "c1", d.Wrap(rec.Handle),
		redisconsumer.WithBlock(20*time.Millisecond), redisconsumer.WithMinIdle(50*time.Millisecond),
		redisconsumer.WithReclaimInterval(20*time.Millisecond), redisconsumer.WithErrorHandler(log.Add))
	if err != nil {
		t.Fatal(err)
	}
	deduptest.RunUntil(t, cons.Run, func() bool { return rec.Runs() == 3 && pending(t, c, stream, "g") == 0 })
	if n := rec.Runs(); n != 3 {
		t.Errorf("handler ran %d times, want 3: two failures, then the effect", n)
	}
	var ee *redisconsumer.EntryError
	if n := len(log.Errors()); n != 2 || !errors.As(log.Errors()[0], &ee) || ee.ID != "m1" || ee.Acked {
		t.Errorf("reported %v, want two unacked EntryErrors for m1", log.Errors())
	}
}

// An entry without the id field is never handed to the handler, and stays
// pending rather than being dropped.
func TestEntryWithoutIDStaysPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := newClient(t)
	stream := prefix + "s"
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []any{"body", "x"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := redisconsumer.Publish(ctx, c, stream, dedup.Message{ID: "ok", Header: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	rec := &consumetest.Recorder{}
	log := &deduptest.ErrorLog{}
	cons, err := redisconsumer.New(c, stream, "g", "c1", rec.Handle,
		redisconsumer.WithBlock(20*time.Millisecond), redisconsumer.WithErrorHandler(log.Add))
	if err != nil {
		t.Fatal(err)
	}
	deduptest.RunUntil(t, cons.Run, func() bool { return rec.Runs() == 1 && log.Count(dedup.ErrInvalidID) == 1 })
	if m := rec.Messages()[0]; m.ID != "ok" || m.Header["k"] != "v" || m.Header[redisconsumer.HeaderEntryID] == "" {
		t.Errorf("handler got %+v", m)
	}
	if n := pending(t, c, stream, "g"); n != 1 {
		t.Errorf("pending %d, want 1 (the entry without id)", n)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	h := func(context.Context, dedup.Message) error { return nil }
	for name, f := range map[string]func() error{
		"nil client":  func() error { _, err := redisconsumer.New(nil, "s", "g", "c", h); return err },
		"nil handler": func() error { _, err := redisconsumer.New(c, "s", "g", "c", nil); return err },
		"empty name":  func() error { _, err := redisconsumer.New(c, "s", "g", "", h); return err },
		"batch": func() error {
			_, err := redisconsumer.New(c, "s", "g", "c", h, redisconsumer.WithBatchSize(0))
			return err
		},
		"same fields": func() error {
			_, err := redisconsumer.New(c, "s", "g", "c", h, redisconsumer.WithIDField("body"))
			return err
		},
		"header clash": func() error {
			_, err := redisconsumer.Publish(context.Background(), c, "s", dedup.Message{ID: "a", Header: map[string]string{"id": "b"}})
			return err
		},
	} {
		if err := f(); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := redisconsumer.Publish(context.Background(), c, "s", dedup.Message{}); !errors.Is(err, dedup.ErrInvalidID) {
		t.Errorf("Publish with empty id: %v, want ErrInvalidID", err)
	}
}
