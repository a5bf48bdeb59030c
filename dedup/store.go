package dedup

import (
	"context"
	"time"
)

// Store keeps one record per message id and hands each id to one consumer at
// a time. It is the contract every exact backend keeps; the deduptest package
// checks it against a real server.
//
// A record is either a claim (processing, owned by the holder of its token
// until its TTL ends) or done (kept until its retention ends). A claim whose
// TTL has passed and a done record whose retention has ended count as absent:
// the next Claim takes the id. TTLs are measured on the store's clock where it
// has one.
type Store interface {
	// Claim takes id atomically for ttl. It reports, in one step, that the
	// caller now owns it (Claimed, with a fresh token), that another consumer
	// does (InProgress), or that it is done (Done).
	Claim(ctx context.Context, id string, ttl time.Duration) (Claim, error)

	// Done marks the caller's claimed id done for retention. It returns an
	// error wrapping ErrClaimLost when token no longer owns the id.
	Done(ctx context.Context, id, token string, retention time.Duration) error

	// Release deletes the caller's claim so the next copy is processed. It
	// returns an error wrapping ErrClaimLost when token no longer owns the id.
	Release(ctx context.Context, id, token string) error
}

// BatchClaimer is a Store that claims many ids in one round trip, for
// consumers that receive messages in batches.
type BatchClaimer interface {
	Store
	// ClaimBatch is Claim for every id, in order: the i-th result answers
	// ids[i]. An id given twice is claimed by its first occurrence; the later
	// ones see it InProgress. The claims are independent: there is no
	// all-or-nothing.
	ClaimBatch(ctx context.Context, ids []string, ttl time.Duration) ([]Claim, error)
}

// State is what a Claim found.
type State int

const (
	// Claimed: the caller owns the id and must call Done or Release.
	Claimed State = iota + 1
	// InProgress: another consumer owns the id and has not finished.
	InProgress
	// Done: the id was processed within the retention window.
	Done
)

func (s State) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case InProgress:
		return "in progress"
	case Done:
		return "done"
	}
	return "invalid"
}

// Claim is the answer of [Store.Claim].
type Claim struct {
	State State
	// Token proves ownership for Done and Release (Claimed only). It is
	// opaque; a new claim always gets a token different from every earlier
	// one.
	Token string
	// RetryAfter is the time left on the holder's claim (InProgress only); 0
	// when unknown.
	RetryAfter time.Duration
}
