package state

import (
	"context"
	"sync/atomic"
)

// A Refusal is one change this package did not make: a Move that found the
// row in a state it may not leave for the target (ErrIllegal), a Move that
// found the row already in the target state (Duplicate: a repeat, nothing
// changed), or an optimistic Update that lost every attempt (ErrConflict).
// It carries no key and no values.
type Refusal struct {
	// Reason is "illegal", "duplicate" or "conflict".
	Reason string
	// Table is the table's name, as given to NewMachine or NewOptimistic.
	Table string
	// To is the target state of a Move; "" for an Update.
	To string
}

// The reasons of a Refusal.
const (
	RefusedIllegal   = "illegal"
	RefusedDuplicate = "duplicate"
	RefusedConflict  = "conflict"
)

// An Observer is told of every Refusal of this process's Machines and
// Optimistic updates, on the caller's goroutine, with the caller's context
// (a tracer adds an event to the caller's span). It must be safe for
// concurrent use and quick.
type Observer func(ctx context.Context, r Refusal)

var observer atomic.Pointer[Observer] // nil: nobody observes

// SetObserver makes o the Observer of every Machine and Optimistic of the
// process; nil (the default) turns observation off, and then a refusal costs
// one atomic load. The metrics and OpenTelemetry integrations provide
// observers; call SetObserver once, at start-up, and join several with
// Observers.
func SetObserver(o Observer) {
	if o == nil {
		observer.Store(nil)
		return
	}
	observer.Store(&o)
}

// refused tells the Observer, if any, of r.
func refused(ctx context.Context, r Refusal) {
	if p := observer.Load(); p != nil {
		(*p)(ctx, r)
	}
}

// Observers returns an Observer that passes every refusal to each of obs
// in order (nil entries are skipped), to attach metrics and traces together.
func Observers(obs ...Observer) Observer {
	var list []Observer
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	return func(ctx context.Context, r Refusal) {
		for _, o := range list {
			o(ctx, r)
		}
	}
}
