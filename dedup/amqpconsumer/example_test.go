package amqpconsumer_test

import (
	"context"
	"fmt"
	"os"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/amqpconsumer"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// A payment published twice (the producer retried after a timeout) is
// charged once; both copies are acknowledged.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	url := os.Getenv("LATCHKEY_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		panic(err)
	}
	q, err := ch.QueueDeclare(fmt.Sprintf("example-amqpdedup-%d", os.Getpid()), true, false, false, false, nil)
	if err != nil {
		panic(err)
	}
	defer func() { _, _ = ch.QueueDelete(q.Name, false, false, false) }()

	for _, id := range []string{"pay-1", "pay-1", "pay-2"} {
		if err := amqpconsumer.Publish(ctx, ch, "", q.Name, dedup.Message{ID: id, Body: []byte("100")}); err != nil {
			panic(err)
		}
	}

	d, err := dedup.New(dedup.FromIdem(memstore.New())) // dedup/redisstore or sqlinbox across processes
	if err != nil {
		panic(err)
	}
	handle := d.Wrap(func(ctx context.Context, m dedup.Message) error {
		fmt.Printf("charge %s: %s\n", m.ID, m.Body)
		if m.ID == "pay-2" {
			stop() // the last one: end the example
		}
		return nil
	})
	cons, err := amqpconsumer.New(ch, q.Name, handle)
	if err != nil {
		panic(err)
	}
	fmt.Println("run:", cons.Run(ctx))
	left, err := ch.QueueDeclarePassive(q.Name, true, false, false, false, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("left:", left.Messages)
	// Output:
	// charge pay-1: 100
	// charge pay-2: 100
	// run: context canceled
	// left: 0
}
