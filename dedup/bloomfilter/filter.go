package bloomfilter

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
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
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all fit. A
// client that also has TxPipeline (all of these do) checks and adds far
// from a rotation with a transaction of plain commands instead of a script
// (see the package doc); one without it takes the script every time.
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
// clock, and every rotation runs in one script, so all consumers agree on
// it. The current and the previous generation have fixed keys (a rotation
// renames one to the other), so a check-and-add far from a rotation is a
// transaction of plain commands on them that no rotation can split; near
// one, the script does the step. Each key expires (PEXPIREAT) when its
// generation leaves the window, so an idle filter leaves nothing behind.
type Filter struct {
	c      Client
	size   Sizing
	period time.Duration
	keys   []string // state, current bitmap, previous bitmap, first release's bits:0 and bits:1
	claim  string   // prefix of the claim keys (Lossy)
	tag    string   // the state's m field: "v2:" and Bits
	view   view     // what the last reply said of the current generation
	// pending counts ids this client added by plain commands and has not
	// yet added to their generation's count: a transaction cannot count
	// only the ids it finds new, so the next step counts them.
	pending pending
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
		keys:   []string{base + "state", base + "cur", base + "prev", base + "bits:0", base + "bits:1"},
		claim:  base + "claim:",
		tag:    "v2:" + strconv.FormatUint(size.Bits, 10),
	}, nil
}

// Sizing returns the filter's shape.
func (f *Filter) Sizing() Sizing { return f.size }

// Period returns a generation's longest life.
func (f *Filter) Period() time.Duration { return f.period }

// Keys returns the filter's fixed keys: its state hash and the two
// generation bitmaps. Lossy adds one short-lived claim key per message in
// processing, under the same hash tag.
func (f *Filter) Keys() []string { return append([]string(nil), f.keys[:3]...) }

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
	return f.seen(ctx, true, ids)
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
	return f.seen(ctx, false, ids)
}

// seen checks ids, and adds them if add is true, MaxChunk at a time: by
// plain commands while the last reply says the current generation is far
// from its rotation, and by the script otherwise.
func (f *Filter) seen(ctx context.Context, add bool, ids []string) ([]bool, error) {
	if err := f.check(ids); err != nil {
		return nil, err
	}
	mode := "test"
	if add {
		mode = "add"
	}
	out := make([]bool, 0, len(ids))
	for lo := 0; lo < len(ids); lo += MaxChunk {
		chunk := ids[lo:min(lo+MaxChunk, len(ids))]
		r, ok, err := f.plain(ctx, add, chunk)
		if err != nil {
			return nil, err
		}
		if !ok {
			v, err := f.call(ctx, filterScript, mode, chunk, nil, 0)
			if err != nil {
				return nil, err
			}
			r = make([]bool, len(chunk))
			for i := range r {
				r[i] = v[2*i] == 1
			}
		}
		out = append(out, r...)
	}
	return out, nil
}

// check validates the filter and ids.
func (f *Filter) check(ids []string) error {
	if f == nil || f.c == nil {
		return fmt.Errorf("%w: bloomfilter: nil filter", dedup.ErrInvalid)
	}
	for _, id := range ids {
		if err := dedup.CheckID(id); err != nil {
			return err
		}
	}
	return nil
}

// run sends ids through the script in mode, MaxChunk at a time, and returns
// the replies, two integers per id. tokens, if not nil, holds one token per
// id, and each id's claim key is passed too.
func (f *Filter) run(ctx context.Context, mode string, ids, tokens []string, ttl time.Duration) ([]int64, error) {
	if err := f.check(ids); err != nil {
		return nil, err
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
// once for ids in mode, and returns two integers per id. The script's
// last three, the current generation's count, start and the time, update
// the filter's view.
func (f *Filter) call(ctx context.Context, script *redis.Script, mode string, ids, tokens []string, ttl time.Duration) ([]int64, error) {
	sent := time.Now()
	keys := f.keys
	if tokens != nil {
		keys = make([]string, 0, len(f.keys)+len(ids))
		keys = append(keys, f.keys...)
		for _, id := range ids {
			keys = append(keys, f.claim+id)
		}
	}
	var pg, pn int64
	if mode == "add" || mode == "done" {
		pg, pn = f.pending.take()
	}
	args := make([]any, 0, 9+len(ids)*(1+f.size.Hashes))
	args = append(args, mode, f.size.Bits, f.size.Hashes, f.size.Capacity, msec(f.period), msec(ttl), len(ids), pg, pn)
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
	if len(r) != 2*len(ids)+4 {
		return nil, fmt.Errorf("bloomfilter: script replied %d values for %d ids", len(r), len(ids))
	}
	tail := r[2*len(ids):]
	if tail[3] < 0 {
		f.view.forget()
	} else {
		f.view.learn(sent, f.period, time.Duration(tail[2]-tail[1])*time.Millisecond, tail[3], tail[0])
	}
	return r[:2*len(ids)], nil
}

func scriptError(err error) error {
	if err != nil && strings.Contains(err.Error(), "bloomfilter: filter was created with") {
		return fmt.Errorf("%w: %s", ErrSizingMismatch, strings.TrimPrefix(err.Error(), "ERR "))
	}
	return err
}

// msec rounds d up to whole milliseconds, at least 1.
func msec(d time.Duration) int64 { return max(1, int64((d+time.Millisecond-1)/time.Millisecond)) }
