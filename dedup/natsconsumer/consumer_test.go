package natsconsumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
	"github.com/latchkey-go/latchkey/dedup/internal/consumetest"
	"github.com/latchkey-go/latchkey/dedup/natsconsumer"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// A failing handler's message is nacked and redelivered; the retry takes
// effect once and is acknowledged.
func TestFailureIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := connect(t)
	stream := newStream(t, js)
	jc := newJSConsumer(t, js, stream, 5*time.Second)
	if _, err := natsconsumer.Publish(ctx, js, stream, dedup.Message{ID: "m1"}); err != nil {
		t.Fatal(err)
	}
	d, err := dedup.New(dedup.FromIdem(memstore.New()))
	if err != nil {
		t.Fatal(err)
	}
	rec := &consumetest.Recorder{Fails: 2}
	log := &deduptest.ErrorLog{}
	cons, err := natsconsumer.New(jc, d.Wrap(rec.Handle), natsconsumer.WithMaxWait(50*time.Millisecond),
		natsconsumer.WithNakDelay(20*time.Millisecond), natsconsumer.WithErrorHandler(log.Add))
	if err != nil {
		t.Fatal(err)
	}
	deduptest.RunUntil(t, cons.Run, func() bool { return rec.Runs() == 3 && settled(t, jc) })
	if n := rec.Runs(); n != 3 {
		t.Errorf("handler ran %d times, want 3: two failures, then the effect", n)
	}
	var me *natsconsumer.MsgError
	if n := len(log.Errors()); n != 2 || !errors.As(log.Errors()[0], &me) || me.ID != "m1" || me.Acked || me.StreamSequence != 1 {
		t.Errorf("reported %v, want two unacked MsgErrors for m1 at seq 1", log.Errors())
	}
}

// A message without the id header never reaches the handler and is not
// acknowledged; the others are passed on with their headers.
func TestMessageWithoutIDIsNotAcked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := connect(t)
	stream := newStream(t, js)
	jc := newJSConsumer(t, js, stream, 5*time.Second)
	if _, err := js.Publish(ctx, stream, []byte("no id")); err != nil {
		t.Fatal(err)
	}
	if _, err := natsconsumer.Publish(ctx, js, stream, dedup.Message{ID: "ok", Body: []byte("b"), Header: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	rec := &consumetest.Recorder{}
	log := &deduptest.ErrorLog{}
	cons, err := natsconsumer.New(jc, rec.Handle, natsconsumer.WithMaxWait(50*time.Millisecond),
		natsconsumer.WithNakDelay(time.Hour), natsconsumer.WithErrorHandler(log.Add))
	if err != nil {
		t.Fatal(err)
	}
	deduptest.RunUntil(t, cons.Run, func() bool { return rec.Runs() == 1 && log.Count(dedup.ErrInvalidID) == 1 })
	if m := rec.Messages()[0]; m.ID != "ok" || string(m.Body) != "b" || m.Header["k"] != "v" || m.Header[natsconsumer.HeaderStreamSequence] != "2" {
		t.Errorf("handler got %+v", m)
	}
	info, err := jc.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 1 {
		t.Errorf("ack pending %d, want 1 (the message without id)", info.NumAckPending)
	}
}

// Publish sets Nats-Msg-Id, so the stream drops a republish within its
// duplicate window; a copy under another Nats-Msg-Id is stored.
func TestPublishBrokerWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := connect(t)
	stream := newStream(t, js)
	m := dedup.Message{ID: "pay-1", Body: []byte("100")}
	opt := natsconsumer.WithIDHeader("Payment-Id")
	first, err := natsconsumer.Publish(ctx, js, stream, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	again, err := natsconsumer.Publish(ctx, js, stream, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !again.Duplicate || again.Sequence != first.Sequence {
		t.Errorf("first %+v, again %+v; want the republish dropped as a duplicate", first, again)
	}
	copyMsg := nats.NewMsg(stream)
	copyMsg.Header.Set(jetstream.MsgIDHeader, "pay-1-retry")
	copyMsg.Header.Set("Payment-Id", "pay-1")
	if ack, err := js.PublishMsg(ctx, copyMsg); err != nil || ack.Duplicate {
		t.Errorf("copy under another Nats-Msg-Id: %+v, %v; want stored", ack, err)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	h := func(context.Context, dedup.Message) error { return nil }
	var f natsconsumer.Fetcher = fakeFetcher{}
	for name, fn := range map[string]func() error{
		"nil fetcher": func() error { _, err := natsconsumer.New(nil, h); return err },
		"nil handler": func() error { _, err := natsconsumer.New(f, nil); return err },
		"batch":       func() error { _, err := natsconsumer.New(f, h, natsconsumer.WithBatchSize(0)); return err },
		"max wait":    func() error { _, err := natsconsumer.New(f, h, natsconsumer.WithMaxWait(0)); return err },
		"nak delay":   func() error { _, err := natsconsumer.New(f, h, natsconsumer.WithNakDelay(-1)); return err },
		"id header":   func() error { _, err := natsconsumer.New(f, h, natsconsumer.WithIDHeader("")); return err },
		"nil publisher": func() error {
			_, err := natsconsumer.Publish(context.Background(), nil, "s", dedup.Message{ID: "a"})
			return err
		},
		"header clash": func() error {
			_, err := natsconsumer.Publish(context.Background(), fakePublisher{}, "s",
				dedup.Message{ID: "a", Header: map[string]string{jetstream.MsgIDHeader: "b"}})
			return err
		},
	} {
		if err := fn(); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := natsconsumer.Publish(context.Background(), fakePublisher{}, "s", dedup.Message{}); !errors.Is(err, dedup.ErrInvalidID) {
		t.Errorf("Publish with empty id: %v, want ErrInvalidID", err)
	}
}

type fakeFetcher struct{}

func (fakeFetcher) Fetch(int, ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	return nil, errors.New("fake")
}

type fakePublisher struct{}

func (fakePublisher) PublishMsg(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return nil, errors.New("fake publisher reached")
}

// A copy arriving while another consumer processes the first is nacked, not
// run, and acknowledged as a duplicate once the first is done.
func TestBusyCopyIsNackedThenAcked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	js := connect(t)
	stream := newStream(t, js)
	jc := newJSConsumer(t, js, stream, 5*time.Second)
	for _, msgID := range []string{"a", "b"} {
		m := nats.NewMsg(stream)
		m.Header.Set(jetstream.MsgIDHeader, msgID)
		m.Header.Set("Payment-Id", "pay-1")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	d, err := dedup.New(dedup.FromIdem(memstore.New()))
	if err != nil {
		t.Fatal(err)
	}
	log := &deduptest.ErrorLog{}
	var effects atomic.Int32
	h := d.Wrap(func(ctx context.Context, m dedup.Message) error {
		for deadline := time.Now().Add(5 * time.Second); log.Count(dedup.ErrInProgress) == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		effects.Add(1)
		return nil
	})
	var conss []*natsconsumer.Consumer
	for range 2 {
		c, err := natsconsumer.New(jc, h, natsconsumer.WithIDHeader("Payment-Id"), natsconsumer.WithBatchSize(1),
			natsconsumer.WithMaxWait(50*time.Millisecond), natsconsumer.WithMaxBusyDelay(50*time.Millisecond),
			natsconsumer.WithErrorHandler(log.Add))
		if err != nil {
			t.Fatal(err)
		}
		conss = append(conss, c)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = conss[1].Run(runCtx) }()
	deduptest.RunUntil(t, conss[0].Run, func() bool { return effects.Load() == 1 && settled(t, jc) })
	stop()
	<-done
	var me *natsconsumer.MsgError
	if log.Count(dedup.ErrInProgress) == 0 || !errors.As(log.Errors()[0], &me) || me.Acked || me.ID != "pay-1" {
		t.Errorf("reported %v, want an unacked busy MsgError for pay-1", log.Errors())
	}
	if n := effects.Load(); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}
