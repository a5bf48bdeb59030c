package amqpconsumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/dedup"
)

// Channel is the part of an amqp091-go channel a Consumer uses.
type Channel interface {
	Qos(prefetchCount, prefetchSize int, global bool) error
	ConsumeWithContext(ctx context.Context, queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp.Table) (<-chan amqp.Delivery, error)
}

var _ Channel = (*amqp.Channel)(nil)

// ErrClosed means the channel or its connection closed under a running
// Consumer, or the broker cancelled the consumer (the queue was deleted).
// The deliveries it held unacknowledged are requeued by the broker.
var ErrClosed = errors.New("amqpconsumer: channel closed")

// Header keys under which the consumer passes delivery metadata in
// dedup.Message.Header, besides the message's own string headers.
const (
	// HeaderRedelivered is "true" when the broker delivered the message
	// before (a nack with requeue, or a consumer that died holding it).
	HeaderRedelivered = "amqp-redelivered"
	// HeaderDeliveryTag is the channel-scoped delivery tag, for logging;
	// do not deduplicate on it.
	HeaderDeliveryTag = "amqp-delivery-tag"
)

// DeliveryError is reported to the error handler for a delivery the handler
// did not settle (Acked false: it was requeued, or rejected when its id is
// invalid) or settled without recording it (dedup.ErrNotRecorded; it was
// acknowledged). Err is the handler's error, or one wrapping
// dedup.ErrInvalidID.
type DeliveryError struct {
	DeliveryTag uint64
	ID          string // the message id, "" when the delivery has none
	Redelivered bool
	Acked       bool
	Err         error
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("amqpconsumer: delivery %d (id %q, redelivered %v, acked %v): %v",
		e.DeliveryTag, e.ID, e.Redelivered, e.Acked, e.Err)
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// Consumer consumes one queue on one channel. It starts no goroutine of its
// own: the caller owns Run's, and amqp091-go's per-subscription goroutine
// ends with Run's ctx or the channel.
type Consumer struct {
	ch      Channel
	queue   string
	handle  dedup.Handler
	cfg     config
	running atomic.Bool
}

// New returns a consumer of queue on ch, handing each delivery to h:
// normally d.Wrap(next) for a dedup.Deduper d, or any handler whose errors
// [dedup.ShouldAck] sorts. It fails with dedup.ErrInvalid for a nil channel
// or handler, an empty queue name, or an option out of range.
func New(ch Channel, queue string, h dedup.Handler, opts ...Option) (*Consumer, error) {
	switch {
	case ch == nil:
		return nil, fmt.Errorf("%w: amqpconsumer: nil channel", dedup.ErrInvalid)
	case h == nil:
		return nil, fmt.Errorf("%w: amqpconsumer: nil handler", dedup.ErrInvalid)
	case queue == "":
		return nil, fmt.Errorf("%w: amqpconsumer: empty queue name", dedup.ErrInvalid)
	}
	cfg := newConfig(opts)
	if cfg.Invalid != nil {
		return nil, cfg.Invalid
	}
	return &Consumer{ch: ch, queue: queue, handle: h, cfg: cfg}, nil
}

// Run sets the prefetch count, subscribes with manual acknowledgements and
// handles deliveries one at a time until ctx is done or the channel closes.
//
// When ctx is done, the handler in progress is cancelled (its delivery is
// requeued), the subscription is cancelled, the deliveries already
// prefetched are requeued, and Run returns ctx.Err(). When the channel
// closes or the broker cancels the subscription, Run returns an error
// wrapping ErrClosed. A failing basic.qos or basic.consume is returned as
// it is. Run returns an error wrapping dedup.ErrInvalid if called while
// already running.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: amqpconsumer: Run called twice", dedup.ErrInvalid)
	}
	defer c.running.Store(false)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.ch.Qos(c.cfg.prefetch, 0, false); err != nil {
		return fmt.Errorf("amqpconsumer: qos: %w", err)
	}
	// The subscription's context cancels it (basic.cancel) when ctx ends;
	// the deliveries channel then closes after the last prefetched one.
	deliveries, err := c.ch.ConsumeWithContext(ctx, c.queue, c.cfg.tag, false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("amqpconsumer: consume %s: %w", c.queue, err)
	}
	for {
		select {
		case <-ctx.Done():
			c.requeueAll(ctx, deliveries)
			return ctx.Err()
		case d, ok := <-deliveries:
			if !ok {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%w: consuming %s", ErrClosed, c.queue)
			}
			c.settle(ctx, d)
		}
	}
}

// requeueAll gives back, without handling them, the deliveries prefetched
// before the subscription was cancelled.
func (c *Consumer) requeueAll(ctx context.Context, deliveries <-chan amqp.Delivery) {
	for d := range deliveries {
		if err := d.Nack(false, true); err != nil {
			c.cfg.Report(ctx, fmt.Errorf("amqpconsumer: nack delivery %d: %w", d.DeliveryTag, err))
		}
	}
}

// settle runs the handler on d and acknowledges it, or waits as configured
// and requeues it.
func (c *Consumer) settle(ctx context.Context, d amqp.Delivery) {
	m, err := c.message(d)
	invalid := err != nil
	if !invalid {
		err = c.handle(ctx, m)
	}
	acked := dedup.ShouldAck(err)
	if err != nil {
		c.cfg.Report(ctx, &DeliveryError{DeliveryTag: d.DeliveryTag, ID: m.ID, Redelivered: d.Redelivered, Acked: acked, Err: err})
	}
	switch {
	case acked:
		err = d.Ack(false)
	case invalid:
		err = d.Reject(false) // redelivering it cannot help
	default:
		c.wait(ctx, err)
		err = d.Nack(false, true)
	}
	if err != nil {
		c.cfg.Report(ctx, fmt.Errorf("amqpconsumer: settle delivery %d: %w", d.DeliveryTag, err))
	}
}

// wait sleeps before a requeue, since RabbitMQ redelivers at once; ctx
// ending cuts it short.
func (c *Consumer) wait(ctx context.Context, err error) {
	d := c.cfg.failureDelay
	if errors.Is(err, dedup.ErrInProgress) {
		d = min(dedup.RetryAfter(err), c.cfg.maxRequeue)
	}
	if d <= 0 || ctx.Err() != nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// message turns a delivery into a dedup.Message.
func (c *Consumer) message(d amqp.Delivery) (dedup.Message, error) {
	m := dedup.Message{Body: d.Body, Header: make(map[string]string, len(d.Headers)+2)}
	for k, v := range d.Headers {
		if s, ok := v.(string); ok {
			m.Header[k] = s
		}
	}
	m.Header[HeaderRedelivered] = strconv.FormatBool(d.Redelivered)
	m.Header[HeaderDeliveryTag] = strconv.FormatUint(d.DeliveryTag, 10)
	if c.cfg.idHeader == "" {
		m.ID = d.MessageId
		if m.ID == "" {
			return m, fmt.Errorf("%w: no message-id property", dedup.ErrInvalidID)
		}
	} else {
		id, ok := d.Headers[c.cfg.idHeader].(string)
		if !ok {
			return m, fmt.Errorf("%w: no string header %q", dedup.ErrInvalidID, c.cfg.idHeader)
		}
		m.ID = id
	}
	return m, dedup.CheckID(m.ID)
}
