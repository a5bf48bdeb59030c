package amqpconsumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/amqpconsumer"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
	"github.com/latchkey-go/latchkey/dedup/internal/consumetest"
)

// A failing handler gets the message back with the redelivered flag, and the
// retry is acked.
func TestFailureIsRequeued(t *testing.T) {
	t.Parallel()
	conn := dial(t)
	queue, pub := newQueue(t, conn)
	if err := amqpconsumer.Publish(context.Background(), pub, "", queue, dedup.Message{ID: "m1", Body: []byte("x"), Header: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	rec := &consumetest.Recorder{Fails: 2}
	log := &deduptest.ErrorLog{}
	cons, err := amqpconsumer.New(channel(t, conn), queue, rec.Handle,
		amqpconsumer.WithFailureDelay(time.Millisecond), amqpconsumer.WithErrorHandler(log.Add))
	if err != nil {
		t.Fatal(err)
	}
	deduptest.RunUntil(t, cons.Run, func() bool { return rec.Runs() == 3 })
	for i, m := range rec.Messages() {
		if want := i > 0; m.ID != "m1" || string(m.Body) != "x" || m.Header["k"] != "v" ||
			m.Header[amqpconsumer.HeaderRedelivered] != map[bool]string{true: "true", false: "false"}[want] {
			t.Errorf("delivery %d: %+v", i, m)
		}
	}
	var de *amqpconsumer.DeliveryError
	if len(log.Errors()) != 2 || !errors.As(log.Errors()[0], &de) || de.ID != "m1" || de.Acked || de.Redelivered {
		t.Errorf("reported %v, want two unacked DeliveryErrors for m1", log.Errors())
	}
	if r := ready(t, pub, queue); r != 0 {
		t.Errorf("%d ready after the retry was acked", r)
	}
}

// A busy copy waits min(RetryAfter, cap) before its requeue.
func TestBusyCopyWaitsBeforeRequeue(t *testing.T) {
	t.Parallel()
	conn := dial(t)
	queue, pub := newQueue(t, conn)
	if err := amqpconsumer.Publish(context.Background(), pub, "", queue, dedup.Message{ID: "busy"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var at []time.Time
	h := func(ctx context.Context, m dedup.Message) error {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if len(at) == 1 {
			return &dedup.InProgressError{RetryAfter: time.Hour}
		}
		return nil
	}
	cons, err := amqpconsumer.New(channel(t, conn), queue, h, amqpconsumer.WithMaxRequeueDelay(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	deduptest.RunUntil(t, cons.Run, func() bool { mu.Lock(); defer mu.Unlock(); return len(at) == 2 })
	if gap := at[1].Sub(at[0]); gap < 200*time.Millisecond || gap > 5*time.Second {
		t.Errorf("redelivered after %v, want about the 200ms cap", gap)
	}
}

// Deliveries without a valid id never reach the handler and are rejected
// without requeue; WithIDHeader reads the id from a header.
func TestIDSources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := dial(t)
	queue, pub := newQueue(t, conn)
	for _, p := range []amqp.Publishing{
		{Body: []byte("no id")},
		{MessageId: "prop", Headers: amqp.Table{"biz-id": "hdr"}},
		{Headers: amqp.Table{"biz-id": int32(7)}},
	} {
		if err := pub.PublishWithContext(ctx, "", queue, false, false, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := amqpconsumer.Publish(ctx, pub, "", queue, dedup.Message{ID: "via-publish"}, amqpconsumer.WithIDHeader("biz-id")); err != nil {
		t.Fatal(err)
	}
	rec := &consumetest.Recorder{}
	log := &deduptest.ErrorLog{}
	cons, err := amqpconsumer.New(channel(t, conn), queue, rec.Handle,
		amqpconsumer.WithIDHeader("biz-id"), amqpconsumer.WithErrorHandler(log.Add))
	if err != nil {
		t.Fatal(err)
	}
	deduptest.RunUntil(t, cons.Run, func() bool { return rec.Runs() == 2 && log.Count(dedup.ErrInvalidID) == 2 })
	if got := rec.Messages(); got[0].ID != "hdr" || got[1].ID != "via-publish" {
		t.Errorf("ids %q and %q, want hdr and via-publish", got[0].ID, got[1].ID)
	}
	if r := ready(t, pub, queue); r != 0 {
		t.Errorf("%d ready; invalid deliveries should be rejected, not requeued", r)
	}
}

// Stopping a consumer requeues what it had prefetched and not handled.
func TestStopRequeuesPrefetched(t *testing.T) {
	t.Parallel()
	conn := dial(t)
	queue, pub := newQueue(t, conn)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if err := amqpconsumer.Publish(context.Background(), pub, "", queue, dedup.Message{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	inside := make(chan struct{})
	var once sync.Once
	h := func(ctx context.Context, m dedup.Message) error {
		once.Do(func() { close(inside) })
		<-ctx.Done()
		return ctx.Err()
	}
	ch := channel(t, conn)
	cons, err := amqpconsumer.New(ch, queue, h, amqpconsumer.WithPrefetch(10))
	if err != nil {
		t.Fatal(err)
	}
	deduptest.RunUntil(t, cons.Run, func() bool {
		select {
		case <-inside:
			return ready(t, pub, queue) == 0 // all five prefetched
		default:
			return false
		}
	})
	// The broker applies requeues asynchronously: poll.
	deadline := time.Now().Add(2 * time.Second)
	r := ready(t, ch, queue)
	for r != 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		r = ready(t, ch, queue)
	}
	if r != 5 {
		t.Errorf("%d ready after stop, want 5", r)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	h := func(context.Context, dedup.Message) error { return nil }
	var ch *amqp.Channel // never used: every call fails before
	for name, f := range map[string]func() error{
		"nil channel": func() error { _, err := amqpconsumer.New(nil, "q", h); return err },
		"nil handler": func() error { _, err := amqpconsumer.New(ch, "q", nil); return err },
		"empty queue": func() error { _, err := amqpconsumer.New(ch, "", h); return err },
		"prefetch": func() error {
			_, err := amqpconsumer.New(ch, "q", h, amqpconsumer.WithPrefetch(0))
			return err
		},
		"delay": func() error {
			_, err := amqpconsumer.New(ch, "q", h, amqpconsumer.WithFailureDelay(-1))
			return err
		},
		"empty header": func() error {
			_, err := amqpconsumer.New(ch, "q", h, amqpconsumer.WithIDHeader(""))
			return err
		},
		"nil publisher": func() error {
			return amqpconsumer.Publish(context.Background(), nil, "", "q", dedup.Message{ID: "a"})
		},
		"header clash": func() error {
			return amqpconsumer.Publish(context.Background(), ch, "", "q",
				dedup.Message{ID: "a", Header: map[string]string{"id": "b"}}, amqpconsumer.WithIDHeader("id"))
		},
	} {
		if err := f(); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := amqpconsumer.Publish(context.Background(), ch, "", "q", dedup.Message{}); !errors.Is(err, dedup.ErrInvalidID) {
		t.Errorf("Publish with empty id: %v, want ErrInvalidID", err)
	}
}
