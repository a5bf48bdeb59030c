package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxSends bounds the sends (single calls or pipelines) in flight at once.
// Calls beyond it queue and leave together as one pipeline. Measured on 2
// cores against Redis 7.0: 8 beat 1, 2, 3, 4 and 16 at 16 and 64 goroutines,
// with contended hand-off unchanged (it is ordered per key anyway).
const maxSends = 8

// batcher coalesces the script calls of concurrent goroutines into
// pipelines: one round trip, and one write and read on each side, for many
// calls. It has no goroutine of its own. A call that finds a free send slot
// and no call on its lock key in flight goes out at once, on its own; other
// calls queue, and when a send completes, its sender hands every queued call
// whose key is not in flight, in arrival order, to the first of them, whose
// goroutine sends them as one pipeline.
//
// Calls on one lock key (KEYS[1]) reach Redis in the order they were made:
// a call made after another's ordered callback ran for the same key is never
// sent before that one completed. So an abandoned acquisition is always
// executed before the release that cleans it up, and a waiter woken by a
// release attempts after it.
type batcher struct {
	c Client

	mu       sync.Mutex
	sending  int            // sends in flight; guarded by mu
	inFlight map[string]int // lock keys of calls in flight; guarded by mu
	queue    []*call        // waiting for a send; guarded by mu
}

type call struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any

	n     int64
	err   error
	batch []*call       // set for the call whose goroutine sends the batch
	done  chan struct{} // closed when n and err (or batch) are set
}

func newBatcher(c Client) *batcher { return &batcher{c: c, inFlight: make(map[string]int)} }

func (b *batcher) run(ctx context.Context, ordered func(), s *redis.Script, keys []string, args ...any) (int64, error) {
	k := keys[0]
	b.mu.Lock()
	if b.sending < maxSends && b.inFlight[k] == 0 && len(b.queue) == 0 {
		b.sending++
		b.inFlight[k]++
		b.mu.Unlock()
		if ordered != nil {
			ordered()
		}
		n, err := s.Run(ctx, b.c, keys, args...).Int64()
		b.finish([]string{k})
		return n, err
	}
	c := &call{ctx: ctx, script: s, keys: keys, args: args, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	start := b.sending < maxSends
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
		// The call may still be sent; its result is dropped. Callers make
		// that safe: an abandoned acquisition is released, by its owner id,
		// with a call that is sent after it.
		go func() {
			<-c.done
			if c.batch != nil {
				b.send(c.batch)
			}
		}()
		return 0, ctx.Err()
	}
	if c.batch != nil {
		b.send(c.batch)
	}
	return c.n, c.err
}

// takeLocked removes from the queue, for one send, every call whose key is
// not in flight and that has no earlier queued call on its key left behind,
// and marks their keys in flight and the send as started. It returns nil if
// there is nothing to send.
func (b *batcher) takeLocked() []*call {
	var batch, rest []*call
	var blocked map[string]bool
	for _, c := range b.queue {
		k := c.keys[0]
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
		b.inFlight[c.keys[0]]++
	}
	b.queue = rest
	b.sending++
	return batch
}

// handOff gives batch to its first call's goroutine to send.
func (b *batcher) handOff(batch []*call) {
	batch[0].batch = batch
	close(batch[0].done)
}

// finish ends a send of calls on keys and starts the next one if calls wait.
func (b *batcher) finish(keys []string) {
	b.mu.Lock()
	for _, k := range keys {
		if b.inFlight[k]--; b.inFlight[k] == 0 {
			delete(b.inFlight, k)
		}
	}
	b.sending--
	batch := b.takeLocked()
	b.mu.Unlock()
	if len(batch) > 0 {
		b.handOff(batch)
	}
}

// send runs batch as one pipeline and completes every call in it; the first
// call is the sender's own, whose done is already closed.
func (b *batcher) send(batch []*call) {
	ctx, cancel := batchContext(batch)
	keys := make([]string, len(batch))
	var res []*redis.Cmd
	if len(batch) == 1 {
		c := batch[0]
		keys[0] = c.keys[0]
		c.n, c.err = c.script.Run(ctx, b.c, c.keys, c.args...).Int64()
	} else {
		pipe := b.c.Pipeline()
		res = make([]*redis.Cmd, len(batch))
		for i, c := range batch {
			keys[i] = c.keys[0]
			res[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		_, _ = pipe.Exec(ctx)
		for i, c := range batch {
			n, err := res[i].Int64()
			if isNoScript(err) { // a restarted or flushed server: load, then run alone
				n, err = c.script.Run(ctx, b.c, c.keys, c.args...).Int64()
			}
			c.n, c.err = n, err
		}
	}
	cancel()
	batch[0].batch = nil
	b.finish(keys)
	for _, c := range batch[1:] {
		close(c.done)
	}
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
