// Package natsoutbox publishes an outbox's messages to NATS JetStream: the
// message's topic as the subject, its id as Nats-Msg-Id, so the stream drops
// a copy the relay publishes again within its duplicate window, and a
// natsconsumer Consumer behind a dedup.Deduper absorbs any copy after it.
package natsoutbox

import (
	"context"
	"fmt"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/natsconsumer"
	"github.com/latchkey-go/latchkey/outbox"
)

// Publisher publishes to a JetStream stream and waits for its
// acknowledgement. It is safe for concurrent use.
type Publisher struct {
	js   natsconsumer.Publisher
	opts []natsconsumer.Option
}

var _ outbox.Publisher = (*Publisher)(nil)

// New returns a publisher on js (a jetstream.JetStream). opts are
// natsconsumer's: WithIDHeader sends the id under one more header, for
// consumers that read it there (Nats-Msg-Id is always set). It fails with
// outbox.ErrInvalid for a nil js.
func New(js natsconsumer.Publisher, opts ...natsconsumer.Option) (*Publisher, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: natsoutbox: nil JetStream", outbox.ErrInvalid)
	}
	return &Publisher{js: js, opts: opts}, nil
}

// Publish publishes m on the subject m.Topic with its payload, its
// outbox.PublishHeaders and its id, and returns once the stream has stored
// it or dropped it as a duplicate. Errors: the server's or the
// connection's, or one wrapping dedup.ErrInvalid or dedup.ErrInvalidID for
// a header that collides with the id's (nothing is sent).
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
	dm := dedup.Message{ID: m.ID, Body: m.Payload, Header: outbox.PublishHeaders(m)}
	if _, err := natsconsumer.Publish(ctx, p.js, m.Topic, dm, p.opts...); err != nil {
		return fmt.Errorf("natsoutbox: %w", err)
	}
	return nil
}
