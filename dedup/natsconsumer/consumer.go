package natsconsumer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/dedup"
)

// Fetcher is the part of a JetStream consumer a Consumer uses;
// jetstream.Consumer fits. It must be a pull consumer with AckPolicy
// explicit.
type Fetcher interface {
	Fetch(batch int, opts ...jetstream.FetchOpt) (jetstream.MessageBatch, error)
}

var _ Fetcher = (jetstream.Consumer)(nil)

// Header keys under which the consumer passes JetStream metadata in
// dedup.Message.Header, for logging; do not deduplicate on them.
const (
	HeaderSubject        = "natsconsumer-subject"
	HeaderStreamSequence = "natsconsumer-stream-seq"
	HeaderNumDelivered   = "natsconsumer-num-delivered"
)

// MsgError is reported to the error handler for a message the handler did
// not settle (it was nacked, or its nak failed and it will be redelivered
// after AckWait), or settled without recording it (dedup.ErrNotRecorded; it
// was acknowledged). Err is the handler's error joined with the Ack or Nak
// error, if any, or one wrapping dedup.ErrInvalidID for a message without a
// valid id header.
type MsgError struct {
	Subject        string
	StreamSequence uint64 // 0 when the metadata could not be read
	ID             string // the message id, "" when the message has none
	Acked          bool
	Err            error
}

func (e *MsgError) Error() string {
	return fmt.Sprintf("natsconsumer: %s seq %d (id %q, acked %v): %v", e.Subject, e.StreamSequence, e.ID, e.Acked, e.Err)
}

func (e *MsgError) Unwrap() error { return e.Err }

// Consumer runs the messages of one JetStream pull consumer through a
// handler. Its Run loop is the only goroutine it uses, and the caller owns
// it. Several Consumers, in one process or many, may share one JetStream
// consumer: the server hands each message to one of them at a time.
type Consumer struct {
	f      Fetcher
	handle dedup.Handler
	cfg    config

	running atomic.Bool
}

// New returns a Consumer fetching from f and handing each message to
// h: normally d.Wrap(next) for a dedup.Deduper d, or any handler whose errors
// [dedup.ShouldAck] sorts. It fails with dedup.ErrInvalid for a nil fetcher
// or handler, or an option out of range.
func New(f Fetcher, h dedup.Handler, opts ...Option) (*Consumer, error) {
	switch {
	case f == nil:
		return nil, fmt.Errorf("%w: natsconsumer: nil fetcher", dedup.ErrInvalid)
	case h == nil:
		return nil, fmt.Errorf("%w: natsconsumer: nil handler", dedup.ErrInvalid)
	}
	cfg := newConfig(opts)
	if cfg.Invalid != nil {
		return nil, cfg.Invalid
	}
	return &Consumer{f: f, handle: h, cfg: cfg}, nil
}

// Run consumes until ctx is done, then returns ctx.Err(). JetStream errors
// (the consumer or stream deleted, the connection down) are reported to the
// error handler and retried with a backoff up to 5 s; they do not end Run.
//
// Cancelling ctx cancels the handler in progress (its message is nacked, as a
// failure) and nacks, without delay, the rest of the batch in hand; Run ends
// once the fetch in flight is over, up to the max wait later. Run returns an
// error wrapping dedup.ErrInvalid if called while already running.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: natsconsumer: Run called twice", dedup.ErrInvalid)
	}
	defer c.running.Store(false)
	return c.cfg.Loop(ctx, c.fetch, func(err error) error { return fmt.Errorf("natsconsumer: fetch: %w", err) })
}

// fetch pulls one batch and settles each message as it arrives.
func (c *Consumer) fetch(ctx context.Context) error {
	batch, err := c.f.Fetch(c.cfg.batch, jetstream.FetchMaxWait(c.cfg.maxWait))
	if err != nil {
		return err
	}
	for msg := range batch.Messages() {
		if ctx.Err() != nil {
			// Stopping: hand the rest back at once rather than after AckWait.
			_ = msg.Nak()
			continue
		}
		c.settle(ctx, msg)
	}
	return batch.Error()
}

// settle runs the handler on msg and acknowledges or nacks it.
func (c *Consumer) settle(ctx context.Context, msg jetstream.Msg) {
	m, err := c.message(msg)
	if err == nil {
		err = c.handle(ctx, m)
	}
	acked := dedup.ShouldAck(err)
	var serr error
	if acked {
		serr = msg.Ack()
	} else {
		serr = msg.NakWithDelay(c.delay(err))
	}
	if serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		e := &MsgError{Subject: msg.Subject(), ID: m.ID, Acked: acked && serr == nil, Err: err}
		if md, merr := msg.Metadata(); merr == nil {
			e.StreamSequence = md.Sequence.Stream
		}
		c.cfg.Report(ctx, e)
	}
}

// delay is the nak delay for a message the handler did not settle.
func (c *Consumer) delay(err error) time.Duration {
	if !errors.Is(err, dedup.ErrInProgress) {
		return c.cfg.nakDelay
	}
	d := dedup.RetryAfter(err)
	if d <= 0 {
		return c.cfg.nakDelay
	}
	if c.cfg.maxBusyDelay > 0 {
		d = min(d, c.cfg.maxBusyDelay)
	}
	return d
}

// message converts msg, returning an error wrapping dedup.ErrInvalidID when
// it has no valid id header.
func (c *Consumer) message(msg jetstream.Msg) (dedup.Message, error) {
	h := msg.Headers()
	m := dedup.Message{Body: msg.Data(), Header: make(map[string]string, len(h)+3)}
	for k, v := range h {
		if len(v) > 0 {
			m.Header[k] = v[0]
		}
	}
	m.Header[HeaderSubject] = msg.Subject()
	if md, err := msg.Metadata(); err == nil {
		m.Header[HeaderStreamSequence] = fmt.Sprint(md.Sequence.Stream)
		m.Header[HeaderNumDelivered] = fmt.Sprint(md.NumDelivered)
	}
	v := h.Values(c.cfg.idHeader)
	if len(v) == 0 {
		return m, fmt.Errorf("%w: no header %q", dedup.ErrInvalidID, c.cfg.idHeader)
	}
	m.ID = v[0]
	return m, dedup.CheckID(m.ID)
}
