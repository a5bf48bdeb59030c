package redisconsumer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
)

// Client is the part of a go-redis client a Consumer uses;
// *redis.Client, *redis.ClusterClient, *redis.Ring and redis.UniversalClient
// all fit.
type Client interface {
	XGroupCreateMkStream(ctx context.Context, stream, group, start string) *redis.StatusCmd
	XReadGroup(ctx context.Context, a *redis.XReadGroupArgs) *redis.XStreamSliceCmd
	XAutoClaim(ctx context.Context, a *redis.XAutoClaimArgs) *redis.XAutoClaimCmd
	XAck(ctx context.Context, stream, group string, ids ...string) *redis.IntCmd
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (redis.UniversalClient)(nil)
)

// HeaderEntryID is the dedup.Message.Header key under which the consumer
// passes the stream entry id, for logging; do not deduplicate on it.
const HeaderEntryID = "redisconsumer-entry-id"

// ackTimeout bounds the XACK of a batch, which runs detached from Run's
// context so that a stopping consumer still acknowledges what it settled.
const ackTimeout = 5 * time.Second

// EntryError is reported to the error handler for an entry the handler did
// not settle (it stays pending), or settled without recording it
// (dedup.ErrNotRecorded; it was acknowledged). Err is the handler's error,
// or one wrapping dedup.ErrInvalidID for an entry without a valid id field.
type EntryError struct {
	EntryID string
	ID      string // the message id, "" when the entry has none
	Acked   bool
	Err     error
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("redisconsumer: entry %s (id %q, acked %v): %v", e.EntryID, e.ID, e.Acked, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// Consumer is one named consumer of a consumer group. Its Run loop is the
// only goroutine it uses, and the caller owns it.
type Consumer struct {
	c                   Client
	stream, group, name string
	handle              dedup.Handler
	cfg                 config

	running atomic.Bool
	// Guarded by running: only Run's goroutine touches these.
	cursor    string    // XAUTOCLAIM position, "0-0" between scans
	lastClaim time.Time // start of the last complete scan
}

// New returns the consumer name of group on stream, handing each
// entry to h: normally d.Wrap(next) for a dedup.Deduper d, or any handler
// whose errors [dedup.ShouldAck] sorts. Give every process its own name: the
// entries a consumer leaves pending are reclaimed by the others once idle.
// It fails with dedup.ErrInvalid for a nil client or handler, an empty name,
// or an option out of range.
func New(c Client, stream, group, name string, h dedup.Handler, opts ...Option) (*Consumer, error) {
	switch {
	case c == nil:
		return nil, fmt.Errorf("%w: redisconsumer: nil client", dedup.ErrInvalid)
	case h == nil:
		return nil, fmt.Errorf("%w: redisconsumer: nil handler", dedup.ErrInvalid)
	case stream == "" || group == "" || name == "":
		return nil, fmt.Errorf("%w: redisconsumer: empty stream, group or consumer name", dedup.ErrInvalid)
	}
	cfg := newConfig(opts)
	if cfg.Invalid != nil {
		return nil, cfg.Invalid
	}
	return &Consumer{c: c, stream: stream, group: group, name: name, handle: h, cfg: cfg, cursor: "0-0"}, nil
}

// Run consumes until ctx is done, then returns ctx.Err(). It creates the
// group (at the start of the stream, creating the stream) if missing,
// reclaims idle pending entries first, then alternates reading new entries
// with periodic reclaim scans. Redis errors are reported to the error handler
// and retried with a backoff up to 5 s; they do not end Run.
//
// Cancelling ctx cancels the handler in progress (its entry stays pending)
// and ends Run once the batch in hand is acknowledged; a blocked XREADGROUP
// may delay that by up to the block time. Run returns an error wrapping
// dedup.ErrInvalid if called while already running.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: redisconsumer: Run called twice", dedup.ErrInvalid)
	}
	defer c.running.Store(false)
	ready := false
	return c.cfg.Loop(ctx, func(ctx context.Context) error {
		if !ready {
			err := c.createGroup(ctx)
			ready = err == nil
			return err
		}
		err := c.poll(ctx)
		if redis.HasErrorPrefix(err, "NOGROUP") {
			ready = false // stream or group deleted under us: recreate
		}
		return err
	}, func(err error) error { return fmt.Errorf("redisconsumer: %s/%s: %w", c.stream, c.group, err) })
}

func (c *Consumer) createGroup(ctx context.Context) error {
	err := c.c.XGroupCreateMkStream(ctx, c.stream, c.group, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return err
	}
	return nil
}

// poll runs one reclaim page when a scan is due or under way, and otherwise
// one read of new entries.
func (c *Consumer) poll(ctx context.Context) error {
	if c.cursor != "0-0" || time.Since(c.lastClaim) >= c.cfg.reclaimEvery {
		if c.cursor == "0-0" {
			c.lastClaim = time.Now()
		}
		msgs, next, err := c.c.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream:   c.stream,
			Group:    c.group,
			MinIdle:  c.cfg.minIdle,
			Start:    c.cursor,
			Count:    c.cfg.batch,
			Consumer: c.name,
		}).Result()
		if err != nil {
			return err
		}
		c.cursor = next
		if len(msgs) > 0 {
			return c.settle(ctx, msgs)
		}
		if c.cursor != "0-0" {
			return nil
		}
	}
	streams, err := c.c.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    c.group,
		Consumer: c.name,
		Streams:  []string{c.stream, ">"},
		Count:    c.cfg.batch,
		Block:    c.cfg.block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, s := range streams {
		if err := c.settle(ctx, s.Messages); err != nil {
			return err
		}
	}
	return nil
}

// settle runs the handler on each entry in turn and acknowledges, in one
// XACK, those it settled. It stops early when ctx is done.
func (c *Consumer) settle(ctx context.Context, msgs []redis.XMessage) error {
	ack := make([]string, 0, len(msgs))
	for _, xm := range msgs {
		if ctx.Err() != nil {
			break
		}
		if xm.Values == nil {
			// Deleted from the stream while pending (Redis 6.2 reports
			// such entries with no fields): nothing left to process.
			ack = append(ack, xm.ID)
			continue
		}
		m, err := c.message(xm)
		if err == nil {
			err = c.handle(ctx, m)
		}
		acked := dedup.ShouldAck(err)
		if acked {
			ack = append(ack, xm.ID)
		}
		if err != nil {
			c.cfg.Report(ctx, &EntryError{EntryID: xm.ID, ID: m.ID, Acked: acked, Err: err})
		}
	}
	if len(ack) == 0 {
		return nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	return c.c.XAck(actx, c.stream, c.group, ack...).Err()
}

// message turns an entry into a dedup.Message.
func (c *Consumer) message(xm redis.XMessage) (dedup.Message, error) {
	m := dedup.Message{Header: make(map[string]string, len(xm.Values))}
	for k, v := range xm.Values {
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		switch k {
		case c.cfg.idField:
			m.ID = s
		case c.cfg.bodyField:
			m.Body = []byte(s)
		default:
			m.Header[k] = s
		}
	}
	m.Header[HeaderEntryID] = xm.ID
	if _, ok := xm.Values[c.cfg.idField]; !ok {
		return m, fmt.Errorf("%w: no field %q", dedup.ErrInvalidID, c.cfg.idField)
	}
	return m, dedup.CheckID(m.ID)
}
