package natsconsumer_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/natsconsumer"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// A payment published twice (the producer retried after a timeout) and once
// more under another Nats-Msg-Id (after the stream's duplicate window) is
// charged once; every stored copy is acknowledged.
func Example() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	url := os.Getenv("LATCHKEY_NATS_URL")
	if url == "" {
		url = nats.DefaultURL
	}
	nc, err := nats.Connect(url)
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	name := fmt.Sprintf("example_natsdedup_%d", os.Getpid())
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}}); err != nil {
		panic(err)
	}
	defer func() { _ = js.DeleteStream(context.Background(), name) }()
	jc, err := js.CreateConsumer(ctx, name, jetstream.ConsumerConfig{
		Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 2 * dedup.DefaultProcessingTTL,
	})
	if err != nil {
		panic(err)
	}

	pay1 := dedup.Message{ID: "pay-1", Body: []byte("100")}
	for _, m := range []dedup.Message{pay1, pay1, {ID: "pay-2", Body: []byte("250")}} {
		ack, err := natsconsumer.Publish(ctx, js, name, m, natsconsumer.WithIDHeader("Payment-Id"))
		if err != nil {
			panic(err)
		}
		fmt.Printf("published %s: duplicate %v\n", m.ID, ack.Duplicate)
	}
	late := nats.NewMsg(name) // a copy the stream's window cannot catch
	late.Header.Set(jetstream.MsgIDHeader, "pay-1-late")
	late.Header.Set("Payment-Id", "pay-1")
	late.Data = []byte("100")
	if _, err := js.PublishMsg(ctx, late); err != nil {
		panic(err)
	}

	d, err := dedup.New(dedup.FromIdem(memstore.New()))
	if err != nil {
		panic(err)
	}
	seen := 0
	handle := d.Wrap(func(ctx context.Context, m dedup.Message) error {
		fmt.Printf("charge %s: %s\n", m.ID, m.Body)
		return nil
	})
	cons, err := natsconsumer.New(jc, func(ctx context.Context, m dedup.Message) error {
		err := handle(ctx, m)
		if seen++; seen == 3 {
			stop() // every stored copy seen: end the example
		}
		return err
	}, natsconsumer.WithIDHeader("Payment-Id"), natsconsumer.WithMaxWait(100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	fmt.Println("run:", cons.Run(ctx))
	if err := nc.Flush(); err != nil { // acks are sent without waiting for the server
		panic(err)
	}
	info, err := jc.Info(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println("awaiting ack:", info.NumAckPending)
	// Output:
	// published pay-1: duplicate false
	// published pay-1: duplicate true
	// published pay-2: duplicate false
	// charge pay-1: 100
	// charge pay-2: 250
	// run: context canceled
	// awaiting ack: 0
}
