package amqpconsumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/amqpconsumer"
	"github.com/latchkey-go/latchkey/internal/dedupdrill"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

func TestMain(m *testing.M) { dedupdrill.Main(m, drillTarget.Role()) }

// drillConfig names the drill's queue.
type drillConfig struct {
	URL, Queue string
}

const drillConsumers = 4 // per process, each on its own channel

// redeliveredToParent holds the ids the test process received with the
// redelivered flag set.
var redeliveredToParent sync.Map

func drillConn(raw string) (drillConfig, *amqp.Connection, error) {
	cfg, err := dedupdrill.Config[drillConfig](raw)
	if err != nil {
		return cfg, nil, err
	}
	conn, err := amqp.Dial(cfg.URL)
	return cfg, conn, err
}

// drillTarget is one queue consumed by four Consumers in each process. The
// broker requeues the killed child's unacknowledged deliveries as soon as its
// connection drops; they find their ids claimed until the processing TTL ends
// and are requeued after a short wait until then.
var drillTarget = dedupdrill.Target{
	Name: "amqpconsumer",
	Publish: func(ctx context.Context, raw string, msgs []dedup.Message) error {
		cfg, conn, err := drillConn(raw)
		if err != nil {
			return err
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		if err := ch.Confirm(false); err != nil {
			return err
		}
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, len(msgs)))
		for _, m := range msgs {
			if err := amqpconsumer.Publish(ctx, ch, "", cfg.Queue, m); err != nil {
				return err
			}
		}
		for range msgs {
			select {
			case c, ok := <-confirms:
				if !ok || !c.Ack {
					return fmt.Errorf("publish %d not confirmed", c.DeliveryTag)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	},
	Consume: func(ctx context.Context, raw, proc string, h dedup.Handler) error {
		cfg, conn, err := drillConn(raw)
		if err != nil {
			return err
		}
		defer conn.Close()
		if proc == "parent" {
			next := h
			h = func(ctx context.Context, m dedup.Message) error {
				if m.Header[amqpconsumer.HeaderRedelivered] == "true" {
					redeliveredToParent.Store(m.ID, true)
				}
				return next(ctx, m)
			}
		}
		return dedupdrill.Parallel(ctx, drillConsumers, func(ctx context.Context, _ int) error {
			ch, err := conn.Channel()
			if err != nil {
				return err
			}
			c, err := amqpconsumer.New(ch, cfg.Queue, h, amqpconsumer.WithPrefetch(10),
				amqpconsumer.WithFailureDelay(2*time.Millisecond), amqpconsumer.WithMaxRequeueDelay(100*time.Millisecond))
			if err != nil {
				return err
			}
			return c.Run(ctx)
		})
	},
	// Drained sees only the ready messages; the drill's wait for idle
	// handlers covers the ones prefetched and not yet acknowledged.
	Drained: func(ctx context.Context, raw string) (bool, error) {
		cfg, conn, err := drillConn(raw)
		if err != nil {
			return false, err
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return false, err
		}
		q, err := ch.QueueDeclarePassive(cfg.Queue, false, false, false, false, nil)
		if err != nil {
			return false, err
		}
		return q.Messages == 0, nil
	},
}

// TestCrashExactlyOnce: 10,000 payments, each published once or twice (a
// second copy is a second message with the same message-id), consumed from
// one queue by two processes, four consumers each on its own channel;
// handlers fail at random (~10%) and the child process is SIGKILLed inside
// its handlers: the broker redelivers its unacknowledged deliveries to the
// test process with the redelivered flag. At the end every id took effect
// exactly once, the ledger holds the expected sum and the queue is empty (see
// dedupdrill).
func TestCrashExactlyOnce(t *testing.T) {
	t.Parallel()
	queue, _ := newQueue(t, dial(t))
	r := dedupdrill.Run(t, drillTarget, drillConfig{URL: testsvc.AMQPURL(t), Queue: queue}, dedupdrill.Options{TTL: time.Second})
	if _, ok := redeliveredToParent.Load(r.Blocked); !ok {
		t.Errorf("the test process never got %s, which the child died holding, as redelivered", r.Blocked)
	}
}
