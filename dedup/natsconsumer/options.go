package natsconsumer

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/internal/consume"
)

// Defaults of the options.
const (
	// DefaultIDHeader is the header that holds the message id: the one
	// JetStream's own duplicate window reads.
	DefaultIDHeader = jetstream.MsgIDHeader
	// DefaultBatchSize is how many messages one Fetch asks for.
	DefaultBatchSize = 10
	// DefaultMaxWait is how long one Fetch waits for its batch to fill.
	DefaultMaxWait = 2 * time.Second
	// DefaultNakDelay is the redelivery delay of a message whose handler
	// failed.
	DefaultNakDelay = time.Second
)

// An Option configures New and Publish (which uses only the id
// header).
type Option func(*config)

type config struct {
	idHeader     string
	batch        int
	maxWait      time.Duration
	nakDelay     time.Duration
	maxBusyDelay time.Duration // 0: no cap
	consume.Config
}

func newConfig(opts []Option) config {
	c := config{
		Config:   consume.Config{Adapter: "natsconsumer"},
		idHeader: DefaultIDHeader,
		batch:    DefaultBatchSize,
		maxWait:  DefaultMaxWait,
		nakDelay: DefaultNakDelay,
	}
	consume.Apply(&c, opts)
	return c
}

// WithIDHeader names the header that holds the message id given to the
// handler as dedup.Message.ID; Publish writes m.ID under it as well as under
// Nats-Msg-Id. Name a business-key header when copies may be published under
// different Nats-Msg-Id values. Default: "Nats-Msg-Id" ([DefaultIDHeader]).
func WithIDHeader(name string) Option {
	return func(c *config) {
		if c.Check(name != "", "empty id header name") {
			c.idHeader = name
		}
	}
}

// WithBatchSize sets how many messages one Fetch asks for, 1 to 10,000. The
// whole batch is delivered at once, so keep batch size times handler time
// well under the consumer's AckWait. Default: 10 ([DefaultBatchSize]).
func WithBatchSize(n int) Option {
	return func(c *config) {
		if c.Check(n >= 1 && n <= 10000, "batch size %d outside [1, 10000]", n) {
			c.batch = n
		}
	}
}

// WithMaxWait sets how long one Fetch waits for a full batch, 1 ms to 1
// minute. Run notices a cancelled context within about this long. Default:
// 2 seconds ([DefaultMaxWait]).
func WithMaxWait(d time.Duration) Option {
	return func(c *config) {
		if c.Check(d >= time.Millisecond && d <= time.Minute, "max wait %v outside [1ms, 1m]", d) {
			c.maxWait = d
		}
	}
}

// WithNakDelay sets the redelivery delay of a message whose handler failed or
// that was rejected (no valid id, store error), 0 to dedup.MaxDuration; 0
// redelivers at once. Default: 1 second ([DefaultNakDelay]).
func WithNakDelay(d time.Duration) Option {
	return func(c *config) {
		if c.Check(d >= 0 && d <= dedup.MaxDuration, "nak delay %v outside [0, %v]", d, dedup.MaxDuration) {
			c.nakDelay = d
		}
	}
}

// WithMaxBusyDelay caps the redelivery delay of a copy that arrived while
// another copy was processing. Uncapped, the delay is the time left on the
// other copy's claim, after which that copy has surely finished; a cap
// redelivers sooner, at the price of more deliveries (each counts against
// MaxDeliver) when the other copy is slow. A busy copy whose claim time is
// unknown gets the nak delay. Default: no cap.
func WithMaxBusyDelay(d time.Duration) Option {
	return func(c *config) {
		if c.Check(d >= time.Millisecond && d <= dedup.MaxDuration, "max busy delay %v outside [1ms, %v]", d, dedup.MaxDuration) {
			c.maxBusyDelay = d
		}
	}
}

// WithErrorHandler sets a function told of every error Run survives: a
// [*MsgError] for a message not acknowledged (or processed but not
// recorded), and JetStream errors, after which Run backs off and tries again.
// It is called from Run's goroutine and must not block for long. Default:
// errors are dropped.
func WithErrorHandler(f func(ctx context.Context, err error)) Option {
	return func(c *config) { c.OnError = f }
}
