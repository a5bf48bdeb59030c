package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/elect"
)

// Relay defaults.
const (
	// DefaultBatchSize is how many pending messages a round reads at most.
	DefaultBatchSize = 100
	// DefaultPollInterval is the wait after a round with little to do.
	DefaultPollInterval = 500 * time.Millisecond
	// DefaultRetention is how long published messages are kept.
	DefaultRetention = 24 * time.Hour
	// DefaultPurgeInterval is how often the leader purges.
	DefaultPurgeInterval = time.Minute
	// DefaultPublishTimeout bounds one Publish call.
	DefaultPublishTimeout = 10 * time.Second
)

// A RelayOption configures NewRelay.
type RelayOption func(*relayConfig)

type relayConfig struct {
	batch                  int
	poll                   time.Duration
	minBackoff, maxBackoff time.Duration
	retention, purgeEvery  time.Duration
	publishTimeout         time.Duration
	onError                func(ctx context.Context, err error)
	termEnd                func(t *elect.Term, err error)
}

func newRelayConfig(opts []RelayOption) (relayConfig, error) {
	c := relayConfig{
		batch: DefaultBatchSize, poll: DefaultPollInterval,
		minBackoff: 100 * time.Millisecond, maxBackoff: 30 * time.Second,
		retention: DefaultRetention, purgeEvery: DefaultPurgeInterval,
		publishTimeout: DefaultPublishTimeout,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.batch < 1 || c.batch > 10000:
		return c, fmt.Errorf("%w: batch size %d outside [1, 10000]", ErrInvalid, c.batch)
	case c.poll < time.Millisecond:
		return c, fmt.Errorf("%w: poll interval %v shorter than 1ms", ErrInvalid, c.poll)
	case c.minBackoff < time.Millisecond || c.maxBackoff < c.minBackoff:
		return c, fmt.Errorf("%w: backoff [%v, %v] is not a range from 1ms", ErrInvalid, c.minBackoff, c.maxBackoff)
	case c.retention < time.Second || c.purgeEvery < time.Second:
		return c, fmt.Errorf("%w: retention %v or purge interval %v shorter than 1s", ErrInvalid, c.retention, c.purgeEvery)
	case c.publishTimeout <= 0:
		return c, fmt.Errorf("%w: publish timeout %v", ErrInvalid, c.publishTimeout)
	}
	return c, nil
}

// WithBatchSize sets how many pending messages a round reads at most.
// Default: 100 (DefaultBatchSize); from 1 to 10,000.
func WithBatchSize(n int) RelayOption { return func(c *relayConfig) { c.batch = n } }

// WithPollInterval sets how long the relay waits after a round that found
// less than a batch to publish. Default: 500 ms (DefaultPollInterval); at
// least 1 ms.
func WithPollInterval(d time.Duration) RelayOption { return func(c *relayConfig) { c.poll = d } }

// WithBackoff sets how long a key whose publication failed waits before
// its retry: min after the first failure, doubling (less up to a quarter,
// at random) after each further one, up to max. Run also campaigns again
// after a term that failed with this backoff. Default: 100 ms and 30 s.
func WithBackoff(min, max time.Duration) RelayOption {
	return func(c *relayConfig) { c.minBackoff, c.maxBackoff = min, max }
}

// WithRetention sets how long published messages are kept before the
// leader purges them. Default: 24 hours (DefaultRetention); at least 1 s.
func WithRetention(d time.Duration) RelayOption { return func(c *relayConfig) { c.retention = d } }

// WithPurgeInterval sets how often the leader purges. Default: 1 minute
// (DefaultPurgeInterval); at least 1 s.
func WithPurgeInterval(d time.Duration) RelayOption { return func(c *relayConfig) { c.purgeEvery = d } }

// WithPublishTimeout bounds each Publish call. Default: 10 s
// (DefaultPublishTimeout).
func WithPublishTimeout(d time.Duration) RelayOption {
	return func(c *relayConfig) { c.publishTimeout = d }
}

// WithErrorHandler calls f with each failed publication, a *PublishError.
// Default: none; the relay retries either way.
func WithErrorHandler(f func(ctx context.Context, err error)) RelayOption {
	return func(c *relayConfig) { c.onError = f }
}

// OnTermEnd makes Run call f after each term with the term (nil when the
// campaign failed) and why it ended, as elect.OnTermEnd does. Default: none.
func OnTermEnd(f func(t *elect.Term, err error)) RelayOption {
	return func(c *relayConfig) { c.termEnd = f }
}
