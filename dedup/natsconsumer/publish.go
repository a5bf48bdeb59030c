package natsconsumer

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/dedup"
)

// Publisher is the part of a JetStream context Publish uses;
// jetstream.JetStream fits.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

var _ Publisher = (jetstream.JetStream)(nil)

// Publish publishes m on subject and waits for the stream's acknowledgement:
// m.Body as the data, m.ID under Nats-Msg-Id and under the id header
// (WithIDHeader; other options are ignored), and each of m.Header as a
// header. Publishing the same m again within the stream's duplicate window
// is dropped by the server and returns a PubAck with Duplicate set; after
// the window it is stored again, and a Consumer behind a Deduper processes
// it once. The window is no more than that (see the package doc).
//
// It fails with dedup.ErrInvalidID for an invalid m.ID and with
// dedup.ErrInvalid for a nil publisher, an empty subject, or a header named
// Nats-Msg-Id or like the id header; nothing is sent then. Otherwise it
// returns the publisher's error.
func Publish(ctx context.Context, p Publisher, subject string, m dedup.Message, opts ...Option) (*jetstream.PubAck, error) {
	cfg := newConfig(opts)
	switch {
	case cfg.Invalid != nil:
		return nil, cfg.Invalid
	case p == nil || subject == "":
		return nil, fmt.Errorf("%w: natsconsumer: nil publisher or empty subject", dedup.ErrInvalid)
	}
	if err := dedup.CheckID(m.ID); err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = m.Body
	for k, v := range m.Header {
		if k == cfg.idHeader || k == jetstream.MsgIDHeader {
			return nil, fmt.Errorf("%w: natsconsumer: header %q collides with the id header", dedup.ErrInvalid, k)
		}
		msg.Header.Set(k, v)
	}
	msg.Header.Set(jetstream.MsgIDHeader, m.ID)
	msg.Header.Set(cfg.idHeader, m.ID)
	return p.PublishMsg(ctx, msg)
}
