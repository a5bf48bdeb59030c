package amqpoutbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/outbox"
	"github.com/latchkey-go/latchkey/outbox/amqpoutbox"
)

// TestPublishConfirmed: Publish returns once the broker confirmed; the
// queued message carries the id as its message-id, the key and sequence
// number as headers, and is persistent.
func TestPublishConfirmed(t *testing.T) {
	conn, err := amqp.Dial(testsvc.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	q := "outbox_amqp_" + hex.EncodeToString(b[:])
	if _, err := ch.QueueDeclare(q, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	p, err := amqpoutbox.New(ch, "")
	if err != nil {
		t.Fatal(err)
	}
	m := outbox.Message{ID: "pay-1", Topic: q, Key: "acct-1", Seq: 3, Payload: []byte("10"), Headers: map[string]string{"Kind": "payment"}}
	if err := p.Publish(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	d, ok, err := ch.Get(q, true)
	if err != nil || !ok {
		t.Fatalf("get: %v, %v", ok, err)
	}
	if d.MessageId != "pay-1" || d.Headers[outbox.HeaderKey] != "acct-1" || d.Headers[outbox.HeaderSeq] != "3" ||
		d.Headers["Kind"] != "payment" || d.DeliveryMode != amqp.Persistent || string(d.Body) != "10" {
		t.Fatalf("queued %+v", d)
	}
	if _, err := amqpoutbox.New(nil, ""); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}
