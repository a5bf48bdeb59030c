package redisconsumer

import (
	"context"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/internal/consume"
)

// Defaults of the options.
const (
	// DefaultIDField is the entry field that holds the message id.
	DefaultIDField = "id"
	// DefaultBodyField is the entry field that holds the message body.
	DefaultBodyField = "body"
	// DefaultBatchSize is how many entries one XREADGROUP or XAUTOCLAIM asks
	// for.
	DefaultBatchSize = 10
	// DefaultBlock is how long one XREADGROUP waits for new entries.
	DefaultBlock = 2 * time.Second
	// DefaultMinIdle is how long a pending entry must have been idle before
	// XAUTOCLAIM takes it over; it equals dedup.DefaultProcessingTTL.
	DefaultMinIdle = dedup.DefaultProcessingTTL
)

// An Option configures New and Publish (which uses only the field
// names).
type Option func(*config)

type config struct {
	idField, bodyField string
	batch              int64
	block              time.Duration
	minIdle            time.Duration
	reclaimEvery       time.Duration // 0: minIdle/2
	consume.Config
}

func newConfig(opts []Option) config {
	c := config{
		Config:    consume.Config{Adapter: "redisconsumer"},
		idField:   DefaultIDField,
		bodyField: DefaultBodyField,
		batch:     DefaultBatchSize,
		block:     DefaultBlock,
		minIdle:   DefaultMinIdle,
	}
	consume.Apply(&c, opts)
	if c.idField == c.bodyField {
		c.Fail("id and body fields are both %q", c.idField)
	}
	if c.reclaimEvery == 0 {
		c.reclaimEvery = max(c.minIdle/2, time.Millisecond)
	}
	return c
}

// WithIDField names the entry field that holds the message id given to the
// handler as dedup.Message.ID. Default: "id" ([DefaultIDField]).
func WithIDField(name string) Option {
	return func(c *config) {
		if c.Check(name != "", "empty id field name") {
			c.idField = name
		}
	}
}

// WithBodyField names the entry field that holds the message body. The
// entry's other fields go to dedup.Message.Header. Default: "body"
// ([DefaultBodyField]).
func WithBodyField(name string) Option {
	return func(c *config) {
		if c.Check(name != "", "empty body field name") {
			c.bodyField = name
		}
	}
}

// WithBatchSize sets how many entries one XREADGROUP or XAUTOCLAIM asks for,
// 1 to 10,000. A batch is handled one entry after another and acknowledged
// in one XACK. Default: 10 ([DefaultBatchSize]).
func WithBatchSize(n int) Option {
	return func(c *config) {
		if c.Check(n >= 1 && n <= 10000, "batch size %d outside [1, 10000]", n) {
			c.batch = int64(n)
		}
	}
}

// WithBlock sets how long one XREADGROUP waits for new entries, 1 ms to 1
// minute. Run notices a cancelled context within about this long. Default: 2
// seconds ([DefaultBlock]).
func WithBlock(d time.Duration) Option {
	return func(c *config) {
		if c.Check(d >= time.Millisecond && d <= time.Minute, "block %v outside [1ms, 1m]", d) {
			c.block = d
		}
	}
}

// WithMinIdle sets how long a pending entry must have been idle before this
// consumer takes it over with XAUTOCLAIM: it is also the delay before a failed
// entry is retried. Keep it at least the deduplicator's processing TTL: an
// entry taken over sooner from a live consumer finds its id still claimed
// and stays pending. Default: 1 minute ([DefaultMinIdle]).
func WithMinIdle(d time.Duration) Option {
	return func(c *config) {
		if c.Check(d >= time.Millisecond && d <= dedup.MaxDuration, "min idle %v outside [1ms, %v]", d, dedup.MaxDuration) {
			c.minIdle = d
		}
	}
}

// WithReclaimInterval sets how often the consumer scans the pending entries
// list with XAUTOCLAIM (a scan that finds a full batch goes on at once).
// Default: half the min-idle time.
func WithReclaimInterval(d time.Duration) Option {
	return func(c *config) {
		if c.Check(d >= time.Millisecond && d <= dedup.MaxDuration, "reclaim interval %v outside [1ms, %v]", d, dedup.MaxDuration) {
			c.reclaimEvery = d
		}
	}
}

// WithErrorHandler sets a function told of every error Run survives: an
// [*EntryError] for an entry left pending (or processed but not recorded),
// and Redis errors, after which Run backs off and tries again. It is called
// from Run's goroutine and must not block for long. Default: errors are
// dropped.
func WithErrorHandler(f func(ctx context.Context, err error)) Option {
	return func(c *config) { c.OnError = f }
}
