package idem

import (
	"context"
	"time"
)

// Store keeps one record per key and hands each key to one caller at a time.
// It is the contract every backend (memstore, redisstore, sqlstore, layered)
// keeps; the idemtest package checks it against a real server.
//
// A record is either a claim (in progress, owned by the caller holding its
// token, until its in-progress deadline) or an outcome (done, kept until its
// retention ends). A claim whose deadline has passed, and an outcome whose
// retention has ended, count as absent: the next Claim takes the key over.
// Deadlines are measured on the store's clock where it has one.
type Store interface {
	// Claim takes key atomically for a caller whose request has the given
	// fingerprint, with an in-progress deadline d from now. It reports, in one
	// step, either that the caller now owns the key (Claimed, with a fresh
	// token), that someone else does (InProgress), or the recorded outcome
	// (Done). Claim does not compare fingerprints; it returns the stored one.
	Claim(ctx context.Context, key, fingerprint string, d time.Duration) (Claim, error)

	// Record turns the caller's claim into an outcome kept for retention.
	// It returns ErrClaimLost when token no longer owns the key.
	Record(ctx context.Context, key, token string, result []byte, retention time.Duration) error

	// Release deletes the caller's claim so the next Claim runs the operation.
	// It returns ErrClaimLost when token no longer owns the key.
	Release(ctx context.Context, key, token string) error
}

// State is what a Claim found.
type State int

const (
	// Claimed: the caller owns the key and must Record or Release it.
	Claimed State = iota + 1
	// InProgress: another caller owns the key.
	InProgress
	// Done: an outcome is recorded.
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
	// Token proves ownership for Record and Release (Claimed only). It is
	// opaque; a takeover always gets a token different from every earlier one.
	Token string
	// Fingerprint is the stored request fingerprint (InProgress and Done).
	Fingerprint string
	// Result is the recorded outcome (Done only); never nil when Done.
	Result []byte
	// RetryAfter is the time left until the holder's deadline (InProgress
	// only); 0 when unknown.
	RetryAfter time.Duration
}
