package bloomfilter

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
)

var (
	//go:embed filter.lua
	filterLua    string
	filterScript = redis.NewScript(filterLua)
)

// Defaults of the options.
const (
	// DefaultPrefix starts every key a filter writes unless WithPrefix says
	// otherwise.
	DefaultPrefix = "bloom:"
	// DefaultPeriod is a generation's longest life when WithPeriod is not
	// given: ids are remembered for 24 to 48 hours at most.
	DefaultPeriod = 24 * time.Hour
	// MaxChunk is the largest number of ids one script call takes. Longer
	// batches are sent as several calls, one after another, so that no call
	// holds Redis for long (about 4 ms per thousand ids at k = 8).
	MaxChunk = 1000
)

// ErrSizingMismatch means the filter's name is already used in Redis by a
// filter of another size (capacity or rate): sharing it would corrupt both.
// Nothing was changed.
var ErrSizingMismatch = errors.New("bloomfilter: filter exists with another sizing")

// Client is the part of a go-redis client a filter uses; *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all fit.
type Client interface {
	redis.Scripter
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (redis.UniversalClient)(nil)
)

// Filter is a Bloom filter of message ids on Redis bitmaps, shared by every
// client that opens it with the same name, prefix and sizing. It is safe for
// concurrent use and holds no goroutines.
//
// It keeps two generations, each a bitmap of Sizing.Bits bits taking up to
// Sizing.Capacity ids. A check consults both; an add goes to the current
// one. The current generation becomes the previous one when it is full or
// its period has passed, and the previous one is dropped then; so an id is
// forgotten at most two periods after it was added, and sooner if two
// generations fill up first. The generation state lives in Redis, on Redis's
// clock, and every step runs as one script, so all consumers agree on it and
// a rotation cannot race an add. Each key expires (PEXPIREAT) when its
// generation leaves the window, so an idle filter leaves nothing behind.
type Filter struct {
	c      Client
	size   Sizing
	period time.Duration
	keys   []string // state, even bitmap, odd bitmap
	claim  string   // prefix of the claim keys (Lossy)
}

// An Option configures New.
type Option func(*options)

type options struct {
	prefix string
	period time.Duration
}

// WithPrefix sets the prefix of every key the filter writes. Default:
// "bloom:" ([DefaultPrefix]). It must not contain '{' or '}'.
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithPeriod sets a generation's longest life: an id is remembered for at
// least one and at most two periods (fewer when traffic fills two
// generations first). Choose it so that two periods cover the broker's
// longest redelivery delay. Default: 24 hours ([DefaultPeriod]); it must be
// between dedup.MinDuration and dedup.MaxDuration.
func WithPeriod(d time.Duration) Option { return func(o *options) { o.period = d } }

// New returns the filter called name on c, sized for capacity ids per
// generation at a false-positive rate of at most rate (see [NewSizing]). It
// touches no key until the first call. It fails with an error wrapping
// dedup.ErrInvalid for a nil client, an empty name or prefix with braces, a
// capacity below 1, a rate outside (0, 1) or a period out of range.
func New(c Client, name string, capacity int64, rate float64, opts ...Option) (*Filter, error) {
	o := options{prefix: DefaultPrefix, period: DefaultPeriod}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case c == nil:
		return nil, fmt.Errorf("%w: bloomfilter: nil Redis client", dedup.ErrInvalid)
	case name == "":
		return nil, fmt.Errorf("%w: bloomfilter: empty filter name", dedup.ErrInvalid)
	case strings.ContainsAny(name, "{}"):
		return nil, fmt.Errorf("%w: bloomfilter: filter name %q contains a brace", dedup.ErrInvalid, name)
	case strings.ContainsAny(o.prefix, "{}"):
		return nil, fmt.Errorf("%w: bloomfilter: prefix %q contains a brace", dedup.ErrInvalid, o.prefix)
	case o.period < dedup.MinDuration || o.period > dedup.MaxDuration:
		return nil, fmt.Errorf("%w: bloomfilter: period %v outside [%v, %v]", dedup.ErrInvalid, o.period, dedup.MinDuration, dedup.MaxDuration)
	}
	size, err := NewSizing(capacity, rate)
	if err != nil {
		return nil, err
	}
	// One hash tag, the name, for every key: on Cluster a filter's keys
	// share a slot, so each script runs on one node with all of them.
	base := o.prefix + "{" + name + "}:"
	return &Filter{
		c:      c,
		size:   size,
		period: o.period,
		keys:   []string{base + "state", base + "bits:0", base + "bits:1"},
		claim:  base + "claim:",
	}, nil
}

// Sizing returns the filter's shape.
func (f *Filter) Sizing() Sizing { return f.size }

// Period returns a generation's longest life.
func (f *Filter) Period() time.Duration { return f.period }

// Keys returns the filter's fixed keys: its state hash and the two
// generation bitmaps. Lossy adds one short-lived claim key per message in
// processing, under the same hash tag.
func (f *Filter) Keys() []string { return append([]string(nil), f.keys...) }

// TestAndAdd reports whether id may have been added before (within the
// window of two generations) and adds it, in one step: of concurrent calls
// with the same new id, exactly one reports false. A true answer is wrong
// for a never-added id with probability at most Sizing.Rate. It fails with
// an error wrapping dedup.ErrInvalidID for an invalid id, without sending
// anything, and with ErrSizingMismatch when the name is in use by a filter
// of another size.
func (f *Filter) TestAndAdd(ctx context.Context, id string) (bool, error) {
	r, err := f.TestAndAddBatch(ctx, []string{id})
	if err != nil {
		return false, err
	}
	return r[0], nil
}

// TestAndAddBatch is TestAndAdd for every id, in order, in one round trip
// per MaxChunk ids: the i-th answer is for ids[i], and an id given twice is
// reported seen by its second occurrence. If any id is invalid nothing is
// sent.
func (f *Filter) TestAndAddBatch(ctx context.Context, ids []string) ([]bool, error) {
	return f.seen(ctx, "add", ids)
}

// Test reports whether id may have been added, without adding it.
func (f *Filter) Test(ctx context.Context, id string) (bool, error) {
	r, err := f.TestBatch(ctx, []string{id})
	if err != nil {
		return false, err
	}
	return r[0], nil
}

// TestBatch is Test for every id, in one round trip per MaxChunk ids.
func (f *Filter) TestBatch(ctx context.Context, ids []string) ([]bool, error) {
	return f.seen(ctx, "test", ids)
}

func (f *Filter) seen(ctx context.Context, mode string, ids []string) ([]bool, error) {
	r, err := f.run(ctx, mode, ids, nil, 0)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(ids))
	for i := range out {
		out[i] = r[2*i] == 1
	}
	return out, nil
}

// run sends ids through the script in mode, MaxChunk at a time, and returns
// the replies, two integers per id. tokens, if not nil, holds one token per
// id, and each id's claim key is passed too.
func (f *Filter) run(ctx context.Context, mode string, ids, tokens []string, ttl time.Duration) ([]int64, error) {
	if f == nil || f.c == nil {
		return nil, fmt.Errorf("%w: bloomfilter: nil filter", dedup.ErrInvalid)
	}
	for _, id := range ids {
		if err := dedup.CheckID(id); err != nil {
			return nil, err
		}
	}
	out := make([]int64, 0, 2*len(ids))
	for lo := 0; lo < len(ids); lo += MaxChunk {
		hi := min(lo+MaxChunk, len(ids))
		var toks []string
		if tokens != nil {
			toks = tokens[lo:hi]
		}
		r, err := f.call(ctx, filterScript, mode, ids[lo:hi], toks, ttl)
		if err != nil {
			return nil, err
		}
		out = append(out, r...)
	}
	return out, nil
}

// call runs script (filterScript, or in tests an earlier version of it)
// once for ids in mode.
func (f *Filter) call(ctx context.Context, script *redis.Script, mode string, ids, tokens []string, ttl time.Duration) ([]int64, error) {
	keys := f.keys
	if tokens != nil {
		keys = make([]string, 0, len(f.keys)+len(ids))
		keys = append(keys, f.keys...)
		for _, id := range ids {
			keys = append(keys, f.claim+id)
		}
	}
	args := make([]any, 0, 7+len(ids)*(1+f.size.Hashes))
	args = append(args, mode, f.size.Bits, f.size.Hashes, f.size.Capacity, msec(f.period), msec(ttl), len(ids))
	pos := make([]string, 0, f.size.Hashes)
	for i, id := range ids {
		tok := ""
		if tokens != nil {
			tok = tokens[i]
		}
		args = append(args, tok)
		pos = appendPositions(pos[:0], id, f.size.Bits, f.size.Hashes)
		for _, p := range pos {
			args = append(args, p)
		}
	}
	r, err := script.Run(ctx, f.c, keys, args...).Int64Slice()
	if err != nil {
		return nil, scriptError(err)
	}
	if len(r) != 2*len(ids) {
		return nil, fmt.Errorf("bloomfilter: script replied %d values for %d ids", len(r), len(ids))
	}
	return r, nil
}

func scriptError(err error) error {
	if err != nil && strings.Contains(err.Error(), "bloomfilter: filter was created with") {
		return fmt.Errorf("%w: %s", ErrSizingMismatch, strings.TrimPrefix(err.Error(), "ERR "))
	}
	return err
}

// msec rounds d up to whole milliseconds, at least 1.
func msec(d time.Duration) int64 { return max(1, int64((d+time.Millisecond-1)/time.Millisecond)) }
