package natsconsumer_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// connect opens a JetStream context on the shared NATS server, closed when
// the test ends.
func connect(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(testsvc.NATSURL(t))
	if err != nil {
		testsvc.Unavailable(t, "nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// newStream creates a stream of one subject, named uniquely for this test
// and deleted when it ends, and returns its name (also its subject).
func newStream(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "latchkey_natsdedup_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name}}); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			testsvc.Unavailable(t, "nats: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return name
}

// newJSConsumer creates a durable pull consumer on stream.
func newJSConsumer(t *testing.T, js jetstream.JetStream, stream string, ackWait time.Duration) jetstream.Consumer {
	t.Helper()
	c, err := js.CreateConsumer(context.Background(), stream, jetstream.ConsumerConfig{
		Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// settled reports whether c has nothing left to deliver or awaiting an ack.
func settled(t *testing.T, c jetstream.Consumer) bool {
	t.Helper()
	info, err := c.Info(context.Background())
	if err != nil {
		t.Error(err)
		return true
	}
	return info.NumPending == 0 && info.NumAckPending == 0
}
