package amqpconsumer

import (
	"context"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/dedup"
)

// Publisher is the part of an amqp091-go channel Publish uses.
type Publisher interface {
	PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp.Publishing) error
}

var _ Publisher = (*amqp.Channel)(nil)

// Publish sends m to exchange with routing key key as a persistent message:
// m.ID as the message-id property (or the header named by WithIDHeader;
// other options are ignored), m.Body as the body and m.Header as string
// headers. Publishing the same m again sends a copy with the same id, which
// a Consumer behind a Deduper processes once. Publish does not wait for a
// publisher confirm; put the channel in confirm mode for that.
//
// It fails with dedup.ErrInvalidID for an invalid m.ID and with
// dedup.ErrInvalid for a nil publisher or a header named like the id
// header; nothing is sent then. Other errors are the channel's.
func Publish(ctx context.Context, p Publisher, exchange, key string, m dedup.Message, opts ...Option) error {
	cfg := newConfig(opts)
	switch {
	case cfg.Invalid != nil:
		return cfg.Invalid
	case p == nil:
		return fmt.Errorf("%w: amqpconsumer: nil publisher", dedup.ErrInvalid)
	}
	if err := dedup.CheckID(m.ID); err != nil {
		return err
	}
	msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: m.Body}
	if len(m.Header) > 0 || cfg.idHeader != "" {
		msg.Headers = make(amqp.Table, len(m.Header)+1)
	}
	for k, v := range m.Header {
		if cfg.idHeader != "" && k == cfg.idHeader {
			return fmt.Errorf("%w: amqpconsumer: header %q collides with the id header", dedup.ErrInvalid, k)
		}
		msg.Headers[k] = v
	}
	if cfg.idHeader == "" {
		msg.MessageId = m.ID
	} else {
		msg.Headers[cfg.idHeader] = m.ID
	}
	if err := p.PublishWithContext(ctx, exchange, key, false, false, msg); err != nil {
		return fmt.Errorf("amqpconsumer: publish: %w", err)
	}
	return nil
}
