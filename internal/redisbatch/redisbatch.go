// Package redisbatch coalesces the Lua script calls of concurrent goroutines
// into pipelines: one round trip, and one write and read on each side, for
// many calls. The Redis backends (lock/redislock, idem/redisstore) send their
// scripts through it.
package redisbatch

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis client a Batcher uses; *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all fit.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.Ring)(nil)
	_ Client = (redis.UniversalClient)(nil)

	_ Runner = (*Batcher)(nil)
	_ Runner = Direct{}
)

// A Runner runs one script call, or one plain command. If ordered is not
// nil, it is called once every call made after it returns is sure to reach
// Redis after this one (for a Runner that cannot promise that, after the call
// completed).
type Runner interface {
	Run(ctx context.Context, ordered func(), s *redis.Script, keys []string, args ...any) *redis.Cmd
	// Do runs the plain command args (its name first), whose one key is
	// key, with the same ordering per key as Run.
	Do(ctx context.Context, key string, args ...any) *redis.Cmd
}

// Direct sends each call on its own (EVALSHA, falling back to EVAL).
type Direct struct{ C Client }

// Run implements Runner.
func (d Direct) Run(ctx context.Context, ordered func(), s *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := s.Run(ctx, d.C, keys, args...)
	if ordered != nil {
		ordered()
	}
	return cmd
}

// Do implements Runner.
func (d Direct) Do(ctx context.Context, _ string, args ...any) *redis.Cmd {
	return doOne(ctx, d.C, args)
}

// doer is the part of go-redis's clients (*redis.Client, *redis.ClusterClient,
// *redis.Ring) that sends one plain command.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// doOne sends one plain command: with the client's Do, or as a pipeline of
// one for a client without it (Client does not require it). Do spares the
// pipeline's allocations and bookkeeping.
func doOne(ctx context.Context, c Client, args []any) *redis.Cmd {
	if d, ok := c.(doer); ok {
		return d.Do(ctx, args...)
	}
	pipe := c.Pipeline()
	cmd := pipe.Do(ctx, args...)
	_, _ = pipe.Exec(ctx)
	return cmd
}

// Batcher is a Runner that coalesces concurrent calls into pipelines. It has
// no goroutine of its own. A call that finds a free send slot and no call on
// its key in flight goes out at once, on its own (one EVALSHA: a lone caller
// pays one round trip, as with Direct); other calls queue, and when a send
// completes, its sender hands every queued call whose key is not in flight,
// in arrival order, to the first of them, whose goroutine sends them as one
// pipeline.
//
// Calls on one key (KEYS[1]) reach Redis in the order they were made: a call
// made after another's ordered callback ran for the same key is never sent
// before that one completed. Calls on different keys are not ordered.
//
// A call whose ctx ends while it waits returns ctx's error at once, but may
// still be sent, and its effect happen, as a call whose reply was lost on the
// network may: callers must make that safe.
type Batcher struct {
	c Client

	mu       sync.Mutex
	limit    limit          // how many sends may be in flight; guarded by mu
	sending  int            // sends in flight; guarded by mu
	inFlight map[string]int // keys of calls in flight; guarded by mu
	queue    []*call        // waiting for a send; guarded by mu
}

type call struct {
	ctx    context.Context
	script *redis.Script // nil for a plain command
	key    string        // the one the call is ordered by: KEYS[1], or the plain command's key
	keys   []string      // the script's KEYS
	args   []any         // the script's, or the plain command's (its name first)

	cmd    *redis.Cmd
	batch  []*call       // set for the call whose goroutine sends the batch
	flight int           // for a batch's first call: the sends in flight when it left
	done   chan struct{} // closed when cmd (or batch) is set
}

// New returns a Batcher sending on c whose sends in flight follow the load,
// between MinSends and MaxSends (see limit).
func New(c Client) *Batcher {
	return &Batcher{c: c, limit: adaptiveLimit(), inFlight: make(map[string]int)}
}

// NewRunner returns the Runner of a Redis backend's options: Direct when
// batching is off, else a Batcher with sends sends in flight, or, for 0,
// as many as the load calls for (New).
func NewRunner(c Client, batching bool, sends int) Runner {
	switch {
	case !batching:
		return Direct{C: c}
	case sends == 0:
		return New(c)
	default:
		return NewSends(c, sends)
	}
}

// NewSends returns a Batcher sending on c with at most sends (at least 1)
// sends in flight, always.
func NewSends(c Client, sends int) *Batcher {
	return &Batcher{c: c, limit: fixedLimit(sends), inFlight: make(map[string]int)}
}

// Run implements Runner: it runs s with keys and args, alone or in a
// pipeline, and returns its reply. keys must not be empty. When ctx ends
// before the reply, Run returns a Cmd failed with ctx's error.
func (b *Batcher) Run(ctx context.Context, ordered func(), s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return b.run(ctx, ordered, &call{ctx: ctx, script: s, key: keys[0], keys: keys, args: args})
}

// Do implements Runner: the plain command args, alone or in a pipeline, as
// Run runs a script.
func (b *Batcher) Do(ctx context.Context, key string, args ...any) *redis.Cmd {
	return b.run(ctx, nil, &call{ctx: ctx, key: key, args: args})
}

// run is Run and Do.
func (b *Batcher) run(ctx context.Context, ordered func(), c *call) *redis.Cmd {
	k := c.key
	b.mu.Lock()
	if b.sending < b.limit.n && b.inFlight[k] == 0 && len(b.queue) == 0 {
		b.sending++
		b.inFlight[k]++
		flight := b.sending
		b.mu.Unlock()
		if ordered != nil {
			ordered()
		}
		sent := time.Now()
		cmd := b.one(ctx, c)
		b.finish1(k, time.Since(sent), flight)
		return cmd
	}
	c.done = make(chan struct{})
	b.queue = append(b.queue, c)
	start := b.sending < b.limit.n
	var batch []*call
	if start {
		batch = b.takeLocked()
	}
	b.mu.Unlock()
	if ordered != nil {
		ordered()
	}
	if len(batch) > 0 {
		b.handOff(batch)
	}

	select {
	case <-c.done:
	case <-ctx.Done():
		// The call may still be sent; its result is dropped.
		go func() {
			<-c.done
			if c.batch != nil {
				b.send(c.batch)
			}
		}()
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
	if c.batch != nil {
		b.send(c.batch)
	}
	return c.cmd
}

// takeLocked removes from the queue, for one send, every call whose key is
// not in flight and that has no earlier queued call on its key left behind,
// and marks their keys in flight and the send as started. It returns nil if
// there is nothing to send.
func (b *Batcher) takeLocked() []*call {
	var batch, rest []*call
	var blocked map[string]bool
	for _, c := range b.queue {
		k := c.key
		if b.inFlight[k] > 0 || blocked[k] {
			if blocked == nil {
				blocked = make(map[string]bool)
			}
			blocked[k] = true
			rest = append(rest, c)
			continue
		}
		batch = append(batch, c)
	}
	if len(batch) == 0 {
		return nil
	}
	for _, c := range batch {
		b.inFlight[c.key]++
	}
	b.queue = rest
	b.sending++
	batch[0].flight = b.sending
	return batch
}

// handOff gives batch to its first call's goroutine to send.
func (b *Batcher) handOff(batch []*call) {
	batch[0].batch = batch
	close(batch[0].done)
}

// finish ends a send of the calls of batch, which took rtt, and starts the
// next one if calls wait.
func (b *Batcher) finish(batch []*call, rtt time.Duration) {
	b.mu.Lock()
	for _, c := range batch {
		b.doneLocked(c.key)
	}
	b.endSendLocked(rtt, batch[0].flight)
}

// finish1 is finish for a call on key sent alone, with flight sends in
// flight when it left.
func (b *Batcher) finish1(key string, rtt time.Duration, flight int) {
	b.mu.Lock()
	b.doneLocked(key)
	b.endSendLocked(rtt, flight)
}

// doneLocked takes one call on k off the keys in flight.
func (b *Batcher) doneLocked(k string) {
	if b.inFlight[k]--; b.inFlight[k] == 0 {
		delete(b.inFlight, k)
	}
}

// endSendLocked ends a send that took rtt with flight sends in flight when
// it left, hands the next batch, if any, to its sender, and unlocks b.mu.
func (b *Batcher) endSendLocked(rtt time.Duration, flight int) {
	b.limit.observe(rtt, flight, len(b.queue) > 0)
	b.sending--
	batch := b.takeLocked()
	b.mu.Unlock()
	if len(batch) > 0 {
		b.handOff(batch)
	}
}

// send runs batch as one pipeline and completes every call in it; the first
// call is the sender's own, whose done is already closed.
func (b *Batcher) send(batch []*call) {
	sent := time.Now()
	ctx, cancel := batchContext(batch)
	if len(batch) == 1 {
		c := batch[0]
		c.cmd = b.one(ctx, c)
	} else {
		pipe := b.c.Pipeline()
		for _, c := range batch {
			if c.script == nil {
				c.cmd = pipe.Do(ctx, c.args...)
			} else {
				c.cmd = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
			}
		}
		_, _ = pipe.Exec(ctx)
		for _, c := range batch {
			if c.script != nil && IsNoScript(c.cmd.Err()) { // a restarted or flushed server: load, then run alone
				c.cmd = c.script.Run(ctx, b.c, c.keys, c.args...)
			}
		}
	}
	cancel()
	batch[0].batch = nil
	b.finish(batch, time.Since(sent))
	for _, c := range batch[1:] {
		close(c.done)
	}
}

// one sends call on its own.
func (b *Batcher) one(ctx context.Context, c *call) *redis.Cmd {
	if c.script == nil {
		return doOne(ctx, b.c, c.args)
	}
	return c.script.Run(ctx, b.c, c.keys, c.args...)
}

// batchContext returns a context for a pipeline of calls: not cancelled by
// any one caller, and with a deadline only if every call has one, the latest.
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(batch[0].ctx), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
}

// IsNoScript reports whether err is Redis's NOSCRIPT: the script is not
// loaded (a restarted or flushed server).
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
