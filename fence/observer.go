package fence

import (
	"context"
	"sync/atomic"
)

// A Refusal is one write (or fenced read) a guard refused with ErrStale: a
// lock holder whose lease had passed to someone else tried to write. It
// carries no key, token or value.
type Refusal struct {
	// Guard names the kind of store: "sql", "redis", or "memory" for Check.
	Guard string
	// Op names the refused call in lower case: "update", "upsert", "claim",
	// "read", "set", "hset", "del", "check".
	Op string
}

// An Observer is told of every refusal of this process's guards, on the
// refused caller's goroutine, with its context (a tracer adds an event to
// the caller's span). It must be safe for concurrent use and quick.
type Observer func(ctx context.Context, r Refusal)

var observer atomic.Pointer[Observer] // nil: nobody observes

// SetObserver makes o the Observer of every guard of the process, the
// sqlfence and redisfence guards and Check; nil (the default) turns
// observation off, and then a refusal costs one atomic load. The metrics and
// OpenTelemetry integrations provide observers; call SetObserver once, at
// start-up, and join several with Observers.
func SetObserver(o Observer) {
	if o == nil {
		observer.Store(nil)
		return
	}
	observer.Store(&o)
}

// Refused tells the Observer, if any, of r. Guards call it where they
// return ErrStale; a guard written outside this module may call it too.
func Refused(ctx context.Context, r Refusal) {
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
