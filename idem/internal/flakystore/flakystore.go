// Package flakystore wraps an idem.Store so that its calls fail on cue, for
// the tests of what is built on a store: no real store can be made to lose
// one write, or refuse one claim, at the moment a test chooses.
package flakystore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/latchkey-go/latchkey/idem"
)

// Store passes calls on to the store it embeds, but fails as many of the
// next Claim, Record and Release calls as a test sets, with Err.
type Store struct {
	idem.Store
	// ClaimFails, RecordFails and ReleaseFails are how many of the next
	// calls of each fail.
	ClaimFails, RecordFails, ReleaseFails atomic.Int32
	// Claims, Records and Releases count the calls made; Failed, those
	// that failed.
	Claims, Records, Releases, Failed atomic.Int32
	// Err is what a failing call returns.
	Err error
}

// New wraps s, whose calls fail with err when told to.
func New(s idem.Store, err error) *Store { return &Store{Store: s, Err: err} }

// Claim implements idem.Store.
func (f *Store) Claim(ctx context.Context, key, fingerprint string, d time.Duration) (idem.Claim, error) {
	if f.fail(&f.Claims, &f.ClaimFails) {
		return idem.Claim{}, f.Err
	}
	return f.Store.Claim(ctx, key, fingerprint, d)
}

// Record implements idem.Store.
func (f *Store) Record(ctx context.Context, key, token string, result []byte, retention time.Duration) error {
	if f.fail(&f.Records, &f.RecordFails) {
		return f.Err
	}
	return f.Store.Record(ctx, key, token, result, retention)
}

// Release implements idem.Store.
func (f *Store) Release(ctx context.Context, key, token string) error {
	if f.fail(&f.Releases, &f.ReleaseFails) {
		return f.Err
	}
	return f.Store.Release(ctx, key, token)
}

// fail counts a call in calls and says whether it fails, which it does
// while fails, counted down by each call, has not run out.
func (f *Store) fail(calls, fails *atomic.Int32) bool {
	calls.Add(1)
	if fails.Add(-1) < 0 {
		return false
	}
	f.Failed.Add(1)
	return true
}
