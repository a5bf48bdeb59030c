package elect

import (
	"context"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// A Leader is who leads an election, as the backend tells anyone who asks.
type Leader struct {
	// Elected is false when nobody leads; the other fields are then zero.
	Elected bool
	// Value is the leader's value (Campaign, Proclaim). A leader that is not
	// latchkey's shows what that client stored: the proposal for etcdctl
	// elect and etcd's Election.
	Value string
	// Token is the term's fencing token; 0 where the backend no longer
	// knows it (a Redis counter that outlived its retention).
	Token uint64
	// Since is when the term began: by the server's clock where the backend
	// records it (ZooKeeper, memory); elsewhere, for Observe, when this
	// observer first saw the term (at most one poll interval late, or
	// earlier for the first leader delivered), and for Leader the zero Time.
	Since time.Time
	// Entry is the server's own record of the leader, where it has one
	// apart from the name: the etcd key or the ZooKeeper node.
	Entry string
	// Unknown is true, only from Observe, when the observer could not
	// confirm who leads for a whole TTL (the backend is down or out of
	// reach): whoever it showed last may have lost the term since. Err says
	// why; the other fields are zero.
	Unknown bool
	// Err is the last failed read's error when Unknown is true, else nil.
	Err error
}

// Leader returns who leads the election now, or ErrNoLeader. Errors:
// ErrUnsupported if the Locker cannot tell who holds a lock
// (lock.Inspector), or the backend's error.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	info, err := lock.Inspect(ctx, e.locker, e.name)
	if err != nil {
		return Leader{}, err
	}
	if !info.Held {
		return Leader{}, ErrNoLeader
	}
	return leaderOf(info), nil
}

// leaderOf is the Leader of a held lock.
func leaderOf(info lock.LockInfo) Leader {
	return Leader{Elected: true, Value: info.Holder, Token: info.Token, Since: info.AcquiredAt, Entry: info.Entry}
}

// sameTerm reports whether a and b are the same leader with the same value.
// The Entry is left out: for a term it changes only with the token, except
// on Redlock, where it tells how many servers hold the lock.
func sameTerm(a, b Leader) bool {
	return a.Elected == b.Elected && a.Unknown == b.Unknown && a.Token == b.Token && a.Value == b.Value
}
