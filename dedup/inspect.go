package dedup

import (
	"context"
	"time"
)

// Inspector is a store an operator can look into and repair: see whether a
// message id is marked, and forget the mark so the next copy of the message
// is processed. dedup/redisstore, sqlinbox, bloomfilter (look up only) and
// FromIdem over an idem.Inspector implement it; a program discovers it with
// a type assertion.
//
// Both methods check the id with CheckID first and return ErrInvalidID,
// without sending anything to the store, for a bad one.
type Inspector interface {
	// Lookup returns id's mark. It returns ErrNotFound when there is none,
	// or the store's error.
	Lookup(ctx context.Context, id string) (Mark, error)

	// Forget deletes id's mark, so the next copy of the message is
	// processed as if it were the first. A claim in progress is refused with
	// an *InProgressError (ErrInProgress, with the time left on the claim)
	// and left as it is, unless force is true: forgetting it lets a copy be
	// processed beside the first. It returns ErrNotFound when there is no
	// mark, ErrCannotForget for a store that cannot forget one id, or the
	// store's error.
	Forget(ctx context.Context, id string, force bool) error
}

// Mark is what a store holds for a message id, as [Inspector.Lookup] finds
// it. Times are the store's clock turned into the local one, as the store's
// remaining time (or age) added to the local time of its answer.
type Mark struct {
	// State is InProgress (a consumer holds the claim) or Done (processed;
	// copies are duplicates).
	State State
	// Marked is when the id was marked done; the zero Time when the store
	// does not keep it.
	Marked time.Time
	// Expires is when the mark goes: the end of the claim (InProgress) or of
	// the retention (Done). The zero Time when the store cannot tell.
	Expires time.Time
	// Approximate says the answer comes from a Bloom filter: Done then means
	// "maybe seen", wrong with probability FalsePositiveRate.
	Approximate bool
	// FillRatio is the share of the filter's bits set in its current
	// generation (Approximate only).
	FillRatio float64
	// FalsePositiveRate is the chance, now, that the filter reports a
	// never-seen id as seen (Approximate only).
	FalsePositiveRate float64
}
