package redlock

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// errSkipped marks a node left out of a round.
var errSkipped = errors.New("redlock: node not in this round")

// An attempt is one TryAcquire: what it asks of the nodes and, indexed by
// node, what they answered. Each slice keeps its one meaning from the round
// that filled it on; what the attempt concludes is read off them by the
// methods below.
type attempt struct {
	key, owner string
	ttl        time.Duration
	timeout    time.Duration // per node call
	quorum     int

	tokens []uint64        // node i's token, where set[i] is nil
	holds  []time.Duration // what is left of another owner's lock on node i, where it said so
	set    []error         // node i's answer to SET NX: nil where it took the key for us
	raised []error         // node i's answer to the write-back: nil where raised, errSkipped where not asked; nil before a write-back
}

// ours reports whether node i is known to hold our lock: its SET NX took the
// key and no write-back found the key gone since.
func (a *attempt) ours(i int) bool {
	return a.set[i] == nil && (a.raised == nil || !errors.Is(a.raised[i], lock.ErrNotHeld))
}

// choose returns the token of the acquisition: the quorum-th smallest token
// of the nodes that hold our lock, the least value that a quorum of them
// issued at or below. It returns false if fewer than a quorum hold it.
func (a *attempt) choose() (uint64, bool) {
	var buf [16]uint64
	vals := buf[:0]
	for i, t := range a.tokens {
		if a.ours(i) {
			vals = append(vals, t)
		}
	}
	if len(vals) < a.quorum {
		return 0, false
	}
	slices.Sort(vals)
	return vals[a.quorum-1], true
}

// fenced counts the nodes that hold our lock with a counter at or above
// token: those that issued token or more, and those the write-back raised.
func (a *attempt) fenced(token uint64) int {
	var n int
	for i, t := range a.tokens {
		if a.ours(i) && (t >= token || a.raised != nil && a.raised[i] == nil) {
			n++
		}
	}
	return n
}

// enough reports whether fenced nodes are enough to grant token: N-Q+1, so
// that every later quorum shares one of them (see the package doc).
func (a *attempt) enough(fenced int) bool {
	return fenced >= len(a.set)-a.quorum+1
}

// failure returns node i's failure in this attempt, nil if it had none: an
// answer to SET NX other than a success or another owner's lock, or else an
// answer to the write-back other than a success or a skip.
func (a *attempt) failure(i int) error {
	if err := a.set[i]; err != nil {
		if errors.Is(err, lock.ErrNotAcquired) {
			return nil
		}
		return err
	}
	if a.raised != nil {
		if err := a.raised[i]; err != nil && !errors.Is(err, errSkipped) {
			return err
		}
	}
	return nil
}

// unreachable returns the error of an attempt that took no lease because too
// many nodes failed: more than N-Q of them, in either round, while at most
// N-Q answered that another owner holds the key. It returns nil when the
// attempt was refused (another owner holds the key, or the votes split).
func (a *attempt) unreachable() error {
	n := len(a.set)
	var held, failed int
	var first error
	for i, err := range a.set {
		switch f := a.failure(i); {
		case errors.Is(err, lock.ErrNotAcquired):
			held++
		case f != nil:
			failed++
			if first == nil {
				first = f
			}
		}
	}
	if held <= n-a.quorum && failed > n-a.quorum {
		return fmt.Errorf("redlock: %d of %d nodes failed, quorum is %d: %w", failed, n, a.quorum, first)
	}
	return nil
}

// shortestHold returns the least time left of another owner's lock that a
// node reported, 0 if none did.
func (a *attempt) shortestHold() time.Duration {
	var least time.Duration
	for i, h := range a.holds {
		if h > 0 && errors.Is(a.set[i], lock.ErrNotAcquired) && (least == 0 || h < least) {
			least = h
		}
	}
	return least
}
