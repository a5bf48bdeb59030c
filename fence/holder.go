package fence

import (
	"context"
	"fmt"
	"math"
)

// A Holder carries a fencing token. *lock.Lease is a Holder, so a lock holder
// passes its lease to a guard; a token that arrived some other way (a message,
// an environment variable) is passed as a [Token].
type Holder interface {
	// Token returns the fencing token: for a lease, strictly greater than
	// every token issued earlier for its lock key.
	Token() uint64
}

// Token is a fencing token held as a plain number. It is a [Holder].
type Token uint64

// Token returns t.
func (t Token) Token() uint64 { return uint64(t) }

var _ Holder = Token(0)

// MaxToken is the largest token the SQL and Redis guards accept: their token
// columns and counters are signed 64-bit integers.
const MaxToken = math.MaxInt64

// TokenOf returns h's token, or an error wrapping ErrInvalid when h is nil or
// its token is 0 (no lock issues 0) or above MaxToken.
func TokenOf(h Holder) (uint64, error) {
	if h == nil {
		return 0, fmt.Errorf("%w: nil holder", ErrInvalid)
	}
	t := h.Token()
	switch {
	case t == 0:
		return 0, fmt.Errorf("%w: token 0", ErrInvalid)
	case t > MaxToken:
		return 0, fmt.Errorf("%w: token %d above %d", ErrInvalid, t, uint64(MaxToken))
	}
	return t, nil
}

// Check is the fencing rule for a resource that keeps its highest applied
// token in memory: it returns nil when a write with h's token may be applied
// over highest (token >= highest), ErrStale when it may not, and an error
// wrapping ErrInvalid for a bad holder (see TokenOf). The caller must hold
// the lock that makes Check and the write one atomic step, and must raise
// highest to the token after writing.
func Check(highest uint64, h Holder) error {
	t, err := TokenOf(h)
	if err != nil {
		return err
	}
	if t < highest {
		Refused(context.Background(), Refusal{Guard: "memory", Op: "check"})
		return fmt.Errorf("%w: token %d, resource has applied %d", ErrStale, t, highest)
	}
	return nil
}
