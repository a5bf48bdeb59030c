// Package redisoutbox publishes an outbox's messages to Redis Streams: one
// XADD per message to the stream named by its topic, the message id in a
// field of its own, so that a redisconsumer Consumer behind a
// dedup.Deduper absorbs a copy the relay publishes again.
package redisoutbox

import (
	"context"
	"fmt"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisconsumer"
	"github.com/latchkey-go/latchkey/outbox"
)

// Publisher appends to Redis streams. It is safe for concurrent use.
type Publisher struct {
	c    redisconsumer.Adder
	opts []redisconsumer.Option
}

var _ outbox.Publisher = (*Publisher)(nil)

// New returns a publisher on c (a *redis.Client or any client with XAdd).
// opts are redisconsumer's: WithIDField and WithBodyField name the fields,
// as the consumers read them (default "id" and "body"). It fails with
// outbox.ErrInvalid for a nil client.
func New(c redisconsumer.Adder, opts ...redisconsumer.Option) (*Publisher, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: redisoutbox: nil client", outbox.ErrInvalid)
	}
	return &Publisher{c: c, opts: opts}, nil
}

// Publish appends m to the stream m.Topic: its id and payload under the id
// and body fields, and each of its outbox.PublishHeaders as a field.
// Errors: the server's, or one wrapping dedup.ErrInvalid for a header named
// like the id or body field (nothing is sent).
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
	dm := dedup.Message{ID: m.ID, Body: m.Payload, Header: outbox.PublishHeaders(m)}
	if _, err := redisconsumer.Publish(ctx, p.c, m.Topic, dm, p.opts...); err != nil {
		return fmt.Errorf("redisoutbox: %w", err)
	}
	return nil
}
