package idem

import (
	"context"
	"time"
)

// Inspector is a Store an operator can look into and repair: find the
// record a customer's retry keeps meeting, and forget it so the next request
// with the key runs. memstore, redisstore, sqlstore and layered implement
// it; a program discovers it with a type assertion on its Store.
//
// Both methods check the key with CheckKey first and return ErrInvalidKey,
// without sending anything to the store, for a bad one.
type Inspector interface {
	// Lookup returns the live record of key. It returns ErrNotFound when
	// there is none (never claimed, released, forgotten, or past its
	// in-progress deadline or retention), or the store's error.
	Lookup(ctx context.Context, key string) (Record, error)

	// Forget deletes the record of key, so the next request with the key
	// runs the operation as if it were the first. A record in progress is
	// refused with an *InProgressError (ErrInProgress, with the time left
	// to its deadline) and left as it is, unless force is true: forgetting
	// a running request lets a copy run beside it, and the first one's
	// Record then fails with ErrClaimLost. It returns ErrNotFound when there
	// is no live record, or the store's error. Deciding and deleting are
	// one step: a claim that appears meanwhile is not forgotten unforced.
	Forget(ctx context.Context, key string, force bool) error
}

// Record is what a store holds for a key, as [Inspector.Lookup] finds it.
// Times are the store's clock turned into the local one: the store's
// remaining time (or age) added to the local time of its answer, so a clock
// skew between the two machines does not shift them.
type Record struct {
	// State is InProgress (a caller holds the claim and has not finished)
	// or Done (an outcome is recorded and replayed).
	State State
	// Fingerprint is the request fingerprint the key was claimed with.
	Fingerprint string
	// Result is the recorded outcome (Done only; never nil then). For
	// idemhttp it is an encoded response: see idemhttp.ReadRecorded.
	Result []byte
	// Created is when the key was claimed; the zero Time when the store
	// does not keep it (redisstore).
	Created time.Time
	// Expires is when the record stops counting: the in-progress deadline
	// (InProgress), after which the next request takes the key over, or the
	// end of the retention (Done), after which the next request runs again.
	// The zero Time when the store cannot tell.
	Expires time.Time
}
