package elect

import (
	"context"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// A Term is one leadership of an election, from Campaign until it ends:
// resigned, or lost (expired, renewal refused or unconfirmed before its
// local deadline). It is a lock.Lease on the election's name whose holder
// label is the leader's value, renewed in the background every TTL/3. Its
// methods are safe for concurrent use.
type Term struct {
	e     *Election
	lease *lock.Lease
}

// Election returns the election the term leads.
func (t *Term) Election() *Election { return t.e }

// Value returns the leader's value: the one it campaigned with, or the one
// it last proclaimed.
func (t *Term) Value() string { return t.lease.Holder() }

// Token returns the term's fencing token: strictly greater than every
// earlier term's for the election's name. Pass it with every write the
// leader makes, to a resource that refuses tokens lower than one it has
// seen (package fence), so a deposed leader's late writes are refused.
func (t *Term) Token() uint64 { return t.lease.Token() }

// Done returns a channel that is closed the moment the leader can no longer
// be sure it leads: after Resign, or when the term is lost. Err says which.
func (t *Term) Done() <-chan struct{} { return t.lease.Done() }

// Err returns nil while the term lasts; after Done is closed it returns
// lock.ErrReleased after Resign or an error wrapping lock.ErrLeaseLost, as
// Lease.Err does.
func (t *Term) Err() error { return t.lease.Err() }

// Deadline returns the term's local deadline, as Lease.Deadline does: the
// moment after which the leader can no longer be sure it leads unless a
// renewal is confirmed before.
func (t *Term) Deadline() time.Time { return t.lease.Deadline() }

// Lease returns the lease behind the term.
func (t *Term) Lease() *lock.Lease { return t.lease }

// Resign ends the term and deletes the leader's key at once, so the next
// candidate is elected without waiting for the TTL. It has Lease.Release's
// contract: safe to call twice, effective even when ctx is done, and an
// error wrapping lock.ErrNotHeld if the term had already been lost.
func (t *Term) Resign(ctx context.Context) error { return t.lease.Release(ctx) }

// Proclaim changes the leader's value without giving up leadership: the
// term keeps its token, and Leader and Observe show value from then on. The
// rules of Campaign's value apply.
//
// Errors: one wrapping ErrInvalid for a bad value (no server is touched),
// ErrUnsupported if the backend cannot change a stored value, lock.ErrReleased
// after Resign, an error wrapping lock.ErrNotHeld and lock.ErrLeaseLost if
// the term was lost or the server says it is no longer ours (Done then
// closes), ctx's error, or the backend's. After a backend error the value
// may or may not have changed; if it did, the term ends at its next renewal
// (never two leaders, only an early end).
func (t *Term) Proclaim(ctx context.Context, value string) error {
	if err := checkValue(value); err != nil {
		return err
	}
	return t.lease.SetHolder(ctx, value)
}
