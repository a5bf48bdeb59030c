//go:build linux

package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/amqpconsumer"
	"github.com/latchkey-go/latchkey/dedup/natsconsumer"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// consumeFunc consumes one shard through h until ctx is done.
type consumeFunc func(ctx context.Context, shard int, h dedup.Handler) error

// e2eBroker is a broker the end-to-end run publishes to.
type e2eBroker struct {
	name string
	url  func(t testing.TB) string
	// prepare makes the run's stream or queues, one per shard, deleted at
	// cleanup.
	prepare func(t *testing.T, url, name string) consumeFunc
}

var e2eBrokers = []e2eBroker{
	{name: "nats", url: testsvc.NATSURL, prepare: prepareNATS},
	{name: "amqp", url: testsvc.AMQPURL, prepare: prepareAMQP},
}

// prepareNATS makes a stream of subjects name.>, and a durable pull
// consumer per shard's subject.
func prepareNATS(t *testing.T, url, name string) consumeFunc {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	consumers := make([]jetstream.Consumer, e2eShards)
	for shard := range e2eShards {
		consumers[shard], err = js.CreateConsumer(ctx, name, jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("shard%d", shard), FilterSubject: fmt.Sprintf("%s.%d", name, shard),
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second, MaxDeliver: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return func(ctx context.Context, shard int, h dedup.Handler) error {
		c, err := natsconsumer.New(consumers[shard], h, natsconsumer.WithBatchSize(100), natsconsumer.WithMaxWait(200*time.Millisecond))
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}
}

// prepareAMQP declares a queue per shard, name.N, which the default
// exchange routes to by its name. The queues are not durable: the broker
// confirms without waiting for its disk, and the run is about the relay,
// not the broker's own crashes.
func prepareAMQP(t *testing.T, url, name string) consumeFunc {
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for shard := range e2eShards {
		q := fmt.Sprintf("%s.%d", name, shard)
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = ch.QueueDelete(q, false, false, false) })
	}
	return func(ctx context.Context, shard int, h dedup.Handler) error {
		cch, err := conn.Channel()
		if err != nil {
			return err
		}
		defer cch.Close()
		c, err := amqpconsumer.New(cch, fmt.Sprintf("%s.%d", name, shard), h, amqpconsumer.WithPrefetch(100))
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}
}
