package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/elect"
)

// A Publisher sends one message to a broker and returns once the broker
// has it (a JetStream PubAck, a RabbitMQ publisher confirm, an XADD's
// reply). It must set m.ID where consumers read their dedup id, since the
// relay publishes a message again when it cannot be sure it was marked.
// Packages natsoutbox, amqpoutbox and redisoutbox hold one each.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
}

// PublisherFunc is a function as a Publisher.
type PublisherFunc func(ctx context.Context, m Message) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, m Message) error { return f(ctx, m) }

// A Relay publishes an outbox's pending messages while it leads an
// election, and marks them published under its term's fencing token.
type Relay struct {
	o   *Outbox
	e   *elect.Election
	pub Publisher
	cfg relayConfig

	// afterPublish, when set (by tests), runs between a round's publishing
	// and its mark.
	afterPublish func(published int)
}

// NewRelay returns a relay of o's messages to p, led through e: any
// election, on any lock backend. It fails with ErrInvalid for a nil
// argument or an option out of range. It starts nothing; call Run.
func NewRelay(o *Outbox, e *elect.Election, p Publisher, opts ...RelayOption) (*Relay, error) {
	if o == nil || e == nil || p == nil {
		return nil, fmt.Errorf("%w: nil outbox, election or publisher", ErrInvalid)
	}
	c, err := newRelayConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Relay{o: o, e: e, pub: p, cfg: c}, nil
}

// Run campaigns in the relay's election with value (who this relay is:
// host, pid), relays while it leads, and campaigns again after each term,
// until ctx is done; it then resigns and returns ctx.Err(). A term ends
// when it is lost (Term.Done), when a write is fenced (ErrFenced: a newer
// term has written), or on a database error; OnTermEnd hears of each.
// Errors wrapping elect.ErrInvalid (a bad value) are returned at once.
func (r *Relay) Run(ctx context.Context, value string) error {
	opts := []elect.RunOption{elect.Again(), elect.WithBackoff(r.cfg.minBackoff, r.cfg.maxBackoff)}
	if r.cfg.termEnd != nil {
		opts = append(opts, elect.OnTermEnd(r.cfg.termEnd))
	}
	return r.e.Run(ctx, value, r.Lead, opts...)
}

// Lead relays for one term, until ctx is done, the term ends or a write is
// fenced, for a caller that runs its own election loop. Each round reads
// up to a batch of pending messages in insertion order, publishes them
// (a key's in sequence), marks those published under the term's token, and
// purges, under the token too, what has been published longer than the
// retention; when a round finds nothing to do, it waits the poll interval.
//
// A message whose publication fails holds back the later messages of its
// key only: they wait while the key backs off (bounded exponential with
// jitter) and are retried in order; other keys go on, as the scan leaves
// out up to 100 keys that back off.
//
// Errors: ctx's cause when ctx is done, the term's error once it ended,
// an error wrapping ErrFenced, or the database's.
func (r *Relay) Lead(ctx context.Context, t *elect.Term) error {
	l := &leader{r: r, t: t, keys: newBackoffs(r.cfg.minBackoff, r.cfg.maxBackoff)}
	for {
		wait, err := l.round(ctx)
		if err != nil {
			return err
		}
		if wait == 0 {
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case <-t.Done():
			timer.Stop()
			return t.Err()
		case <-timer.C:
		}
	}
}

// leader is one term of a relay.
type leader struct {
	r         *Relay
	t         *elect.Term
	keys      *backoffs
	lastPurge time.Time
}

// round publishes one batch, marks it and purges when due, and returns how
// long to wait before the next (0: at once, there is more).
func (l *leader) round(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, context.Cause(ctx)
	}
	if err := l.t.Err(); err != nil {
		return 0, err
	}
	keys, ids := l.keys.skipped(time.Now())
	batch, err := l.r.o.pending(ctx, l.r.cfg.batch, keys, ids)
	if err != nil {
		return 0, err
	}
	sent := l.publish(ctx, batch)
	if l.r.afterPublish != nil {
		l.r.afterPublish(len(sent))
	}
	if err := l.mark(ctx, sent); err != nil {
		return 0, err
	}
	if err := l.purge(ctx); err != nil {
		return 0, err
	}
	if len(batch) == l.r.cfg.batch && len(sent) > 0 {
		return 0, nil
	}
	return l.keys.wait(time.Now(), l.r.cfg.poll), nil
}

// publish publishes the batch in order, skipping the keys that back off
// or failed earlier in this round, and returns the row ids published.
func (l *leader) publish(ctx context.Context, batch []pending) []int64 {
	var sent []int64
	now := time.Now()
	held := map[string]bool{}
	for _, p := range batch {
		k := orderKey(p.msg)
		if held[k] || l.keys.waiting(k, now) {
			held[k] = true
			continue
		}
		if ctx.Err() != nil || l.t.Err() != nil {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, l.r.cfg.publishTimeout)
		err := l.r.pub.Publish(pctx, p.msg)
		cancel()
		if err != nil {
			held[k] = true
			l.keys.failed(k, time.Now())
			l.r.report(ctx, p.msg, err)
			continue
		}
		l.keys.succeeded(k)
		sent = append(sent, p.rowID)
	}
	return sent
}

// orderKey is the key a message is ordered under: its own id when it has
// no key (keys hold no control characters, so the two never meet).
func orderKey(m Message) string {
	if m.Key == "" {
		return unorderedPrefix + m.ID
	}
	return m.Key
}

// unorderedPrefix starts the order key of a message without a key.
const unorderedPrefix = "\x00"

// markWait bounds a mark or purge once the relay's context is done.
const markWait = 10 * time.Second

// mark marks the rows published. It runs to its end even when the term is
// lost meanwhile: the fence, not the context, decides whether a relay that
// was deposed may still write, so a relay that wakes from a pause and
// marks is refused by the database (ErrFenced) if a newer term has
// written, and otherwise records publications that did happen.
func (l *leader) mark(ctx context.Context, rowIDs []int64) error {
	if len(rowIDs) == 0 {
		return nil
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markWait)
	defer cancel()
	return l.r.o.mark(mctx, l.t.Token(), l.t.Value(), rowIDs)
}

// purge deletes what was published longer ago than the retention, at most
// once per purge interval.
func (l *leader) purge(ctx context.Context) error {
	now := time.Now()
	if now.Sub(l.lastPurge) < l.r.cfg.purgeEvery {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, markWait)
	defer cancel()
	if _, err := l.r.o.purge(pctx, l.t.Token(), l.t.Value(), l.r.cfg.retention); err != nil {
		return err
	}
	l.lastPurge = now
	return nil
}

// report hands a publication's failure to WithErrorHandler's function.
func (r *Relay) report(ctx context.Context, m Message, err error) {
	if r.cfg.onError != nil {
		r.cfg.onError(ctx, &PublishError{Message: m, Err: err})
	}
}

// PublishError is a failed publication, as WithErrorHandler reports it.
type PublishError struct {
	Message Message // the message, as the relay read it
	Err     error   // the publisher's error
}

// Error says which message failed and why.
func (e *PublishError) Error() string {
	return fmt.Sprintf("outbox: publish %s (topic %s, key %q): %v", e.Message.ID, e.Message.Topic, e.Message.Key, e.Err)
}

// Unwrap returns the publisher's error.
func (e *PublishError) Unwrap() error { return e.Err }
