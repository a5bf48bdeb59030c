package amqpconsumer_test

import (
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// dial opens a connection to the shared broker, closed at cleanup.
func dial(t *testing.T) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(testsvc.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func channel(t *testing.T, conn *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// newQueue declares a queue named after the test, deleted at cleanup, and
// returns its name and a channel to publish and inspect with.
func newQueue(t *testing.T, conn *amqp.Connection) (string, *amqp.Channel) {
	t.Helper()
	ch := channel(t, conn)
	name := "amqpconsumer-" + strings.TrimSuffix(testsvc.KeyPrefix(t), ":")
	if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch.IsClosed() {
			return
		}
		_, _ = ch.QueueDelete(name, false, false, false)
	})
	return name, ch
}

// ready returns the number of messages ready for delivery in queue.
func ready(t *testing.T, ch *amqp.Channel, queue string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}
