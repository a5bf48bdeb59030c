// Package amqpoutbox publishes an outbox's messages to RabbitMQ with
// publisher confirms: each message goes to one exchange with its topic as
// the routing key and its id as the message-id property, and Publish
// returns only once the broker has confirmed it. An amqpconsumer Consumer
// behind a dedup.Deduper absorbs a copy the relay publishes again.
//
// The broker confirms a message that no queue takes: declare the queues
// and their bindings before the relay starts. A channel that closed fails
// every Publish after it; make a new Publisher on a new channel.
package amqpoutbox

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/amqpconsumer"
	"github.com/latchkey-go/latchkey/outbox"
)

// ErrNacked means the broker refused a message (basic.nack): it was not
// stored, and the relay publishes it again.
var ErrNacked = errors.New("amqpoutbox: message refused by the broker")

// Channel is the part of an amqp091-go channel the publisher uses;
// *amqp.Channel fits.
type Channel interface {
	Confirm(noWait bool) error
	PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp.Publishing) (*amqp.DeferredConfirmation, error)
}

var _ Channel = (*amqp.Channel)(nil)

// Publisher publishes on one channel in confirm mode. It is safe for
// concurrent use.
type Publisher struct {
	ch       Channel
	exchange string
	opts     []amqpconsumer.Option
}

var _ outbox.Publisher = (*Publisher)(nil)

// New puts ch in confirm mode and returns a publisher to exchange (""
// is the default exchange, which routes to the queue named by the routing
// key). opts are amqpconsumer's: WithIDHeader sends the id under that
// header instead of the message-id property. Errors: one wrapping
// outbox.ErrInvalid for a nil channel, or the channel's.
func New(ch Channel, exchange string, opts ...amqpconsumer.Option) (*Publisher, error) {
	if ch == nil {
		return nil, fmt.Errorf("%w: amqpoutbox: nil channel", outbox.ErrInvalid)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("amqpoutbox: confirm mode: %w", err)
	}
	return &Publisher{ch: ch, exchange: exchange, opts: opts}, nil
}

// Publish sends m as a persistent message with routing key m.Topic, its
// payload as the body and its outbox.PublishHeaders as headers, and waits
// for the broker's confirm. Errors: ErrNacked, ctx's, the channel's, or
// one wrapping dedup.ErrInvalid for a header that collides with the id's.
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
	dm := dedup.Message{ID: m.ID, Body: m.Payload, Header: outbox.PublishHeaders(m)}
	if err := amqpconsumer.Publish(ctx, confirming{p.ch}, p.exchange, m.Topic, dm, p.opts...); err != nil {
		return fmt.Errorf("amqpoutbox: %w", err)
	}
	return nil
}

// confirming is an amqpconsumer.Publisher that waits for each confirm.
type confirming struct{ ch Channel }

func (c confirming) PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp.Publishing) error {
	dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, immediate, msg)
	if err != nil {
		return err
	}
	if dc == nil {
		return errors.New("channel not in confirm mode")
	}
	ok, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		return err
	case !ok:
		return ErrNacked
	}
	return nil
}
