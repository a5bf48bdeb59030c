package redislock

import (
	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/semaphore"
)

// NewSemaphores returns a semaphore.Client whose permits live in client's
// Redis (one server or a Cluster), with the options of New. Clients that
// share permits need the same prefix, and a name's permits exclude its lock
// and read-write lock of the same prefix: an acquisition while the name is
// held in another mode fails with a *lock.ModeError.
//
// A name's permits are one sorted set of its holders' lease ends, by the
// server's clock, and one hash of N, the permits used and each holder's
// count, token and start, all under the name's hash tag; every acquisition,
// renewal and release is one script, which first drops the holders whose
// lease has ended, so a crashed holder's permits come back after its TTL and
// never before. The permits of all names a Client holds are renewed in one
// pipeline per tick. Fencing tokens come from a counter per name, as a
// lock's do (see the package doc). Releases of a name someone waits for are
// published on the channel prefix+"released", which wakes the waiters of
// every Client; within a Client they are served in arrival order.
//
// It returns an error wrapping lock.ErrInvalid for a nil client or a bad
// option, and touches no server until the first Acquire. Close the Client
// when done: it stops the pub/sub subscription (and not the go-redis client).
func NewSemaphores(client Client, opts ...Option) (*semaphore.Client, error) {
	nopts := make([]redisnode.Option, len(opts))
	for i, opt := range opts {
		nopts[i] = redisnode.Option(opt)
	}
	b, err := redisnode.NewSemaphores(client, nopts...)
	if err != nil {
		return nil, err
	}
	return semaphore.New(b)
}
