package redislock

import (
	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/rwlock"
)

// NewRW returns a read-write Locker (package rwlock) that keeps its locks
// in client's Redis, with New's options. Each name's read-write lock lives
// in keys of its own, beside the name's plain lock and semaphore, all with
// the name's hash tag, so it works on Redis Cluster; one name is one
// resource, so an acquisition while the name is held as a lock or a
// semaphore (of the same prefix) fails at once with a *lock.ModeError:
//
//	<prefix>{name}:rw:writer        the writer's owner, expiring with its lease
//	<prefix>{name}:rw:writer-token  the writer's token
//	<prefix>{name}:rw:readers       readers: "<token> <owner>" -> lease end (ms, server clock)
//	<prefix>{name}:rw:intents       waiting writers: owner -> end of intent
//	<prefix>{name}:rw:fence         the last token, kept for the token retention
//	<prefix>{name}:rw:waiters       set for 10 s by a failed attempt
//
// Every acquisition, in either mode, takes its token from the one counter,
// as a lock's: max(last + 1, server time in µs). Releases that may let
// someone in are published on the Locker's channel, as a lock's are.
// It returns an error wrapping lock.ErrInvalid for a nil client or a bad
// option, and touches no server until the first acquisition. Close the
// Locker when done: it stops the pub/sub subscription.
func NewRW(client Client, opts ...Option) (*rwlock.Locker, error) {
	nopts := make([]redisnode.Option, len(opts))
	for i, opt := range opts {
		nopts[i] = redisnode.Option(opt)
	}
	n, err := redisnode.New(client, nopts...)
	if err != nil {
		return nil, err
	}
	return rwlock.New(n.RW())
}
