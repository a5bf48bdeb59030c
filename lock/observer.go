package lock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// An Observer is told what a Manager's leases go through: every Acquire call,
// every renewal, every loss and every release. It is how metrics and logs are
// attached without the lock package importing either (see the metrics
// package for Prometheus collectors, and [LogObserver] for log/slog).
//
// It is a function, as the observers of idem, idemhttp and dedup are. It is
// called synchronously on the goroutine that caused the event (the caller of
// Acquire or Release, or the Manager's renewal goroutines), never with the
// Manager's mutex held, and possibly concurrently: it must be safe for
// concurrent use and quick. It must not call back into the Lease. It takes no
// context argument, unlike idem's and dedup's, because renewals and losses
// happen in the background, outside any caller's context; the events of
// Acquire and Release carry their caller's context in Event.Context.
type Observer func(Event)

// EventKind says what happened to a lease.
type EventKind int

// The kinds of Event. Every lease that an EventAcquire with a nil Err
// reports ends with exactly one EventRelease or EventLoss, so a gauge of held
// leases can be kept from the events alone.
const (
	// EventAcquire ends an Acquire call, held or not (see Event.Err).
	EventAcquire EventKind = iota + 1
	// EventRenew ends one renewal round trip of a held lease.
	EventRenew
	// EventLoss reports a lease that ended without Release: Done has closed
	// and Err wraps ErrLeaseLost.
	EventLoss
	// EventRelease ends a Release call that ended a held lease.
	EventRelease
)

// String returns "acquire", "renew", "loss" or "release".
func (k EventKind) String() string {
	switch k {
	case EventAcquire:
		return "acquire"
	case EventRenew:
		return "renew"
	case EventLoss:
		return "loss"
	case EventRelease:
		return "release"
	}
	return "invalid"
}

// LossReason says why a lease was lost.
type LossReason string

// The reasons of EventLoss.
const (
	// LossRefused: the backend refused a renewal; another holder may have
	// the lock.
	LossRefused LossReason = "renewal_refused"
	// LossUnconfirmed: no renewal was confirmed before the local deadline
	// (the backend was unreachable or slow).
	LossUnconfirmed LossReason = "renewal_unconfirmed"
	// LossExpired: a lease taken WithFixedTTL reached its TTL.
	LossExpired LossReason = "expired"
)

// An Event is one thing that happened to a lease.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Key is the lock's key. It is the caller's data (it may name an account
	// or an order): do not use it as a metric label, and log it only where
	// keys may be logged.
	Key string
	// Err is the outcome. EventAcquire: nil when the lease is held, else
	// Acquire's error (ErrNotAcquired, a context error, ErrInvalid, or the
	// backend's). EventRenew: nil when the renewal was confirmed, else its
	// error (wrapping ErrNotHeld when refused; any other is retried until the
	// deadline). EventLoss: the lease's Err, wrapping ErrLeaseLost.
	// EventRelease: the backend's error, or nil.
	Err error
	// Duration is the length of the Acquire call (EventAcquire), the renewal
	// round trip (EventRenew), or the Release call (EventRelease). For
	// EventLoss it is how long the lease had been held.
	Duration time.Duration
	// Waited is, for EventAcquire, the part of Duration spent waiting for
	// another holder: 0 when the first attempt decided the call.
	Waited time.Duration
	// Attempts is, for EventAcquire, how many times the backend was tried.
	Attempts int
	// Reason is, for EventLoss, why the lease was lost.
	Reason LossReason
	// Held is, for EventRelease and EventLoss, how long the lease was held:
	// from the start of the attempt that won it to the Release call or the
	// loss.
	Held time.Duration
	// Context is the caller's context for EventAcquire and EventRelease (a
	// tracer parents its spans on it), and context.Background() for
	// EventRenew and EventLoss, which happen in the background.
	Context context.Context
	// Lease is the lease the event is about: nil for an EventAcquire that
	// did not acquire. It tells an observer which events belong together
	// (the acquisition, renewals and end of one lease); the Observer must
	// not call its methods.
	Lease *Lease
}

// SetObserver makes o the Observer of the leases that Acquire hands out from
// now on (leases held already keep the one they were acquired under). A nil
// o turns observation off; that is the default, and then the Manager does no
// work for observers at all. It is safe to call concurrently with Acquire, but
// is meant to be called once, when the Locker is set up.
func (m *Manager) SetObserver(o Observer) {
	if o == nil {
		m.obs.Store(nil)
		return
	}
	m.obs.Store(&o)
}

// observer returns the current Observer, or nil.
func (m *Manager) observer() Observer {
	if p := m.obs.Load(); p != nil {
		return *p
	}
	return nil
}

// observeAcquire reports the end of an Acquire call made with ctx that began
// at begin and whose first attempt failed at firstFail (zero if none failed).
func observeAcquire(ctx context.Context, o Observer, key string, begin, firstFail time.Time, attempts int, l *Lease, err error) {
	now := time.Now()
	e := Event{Kind: EventAcquire, Key: key, Err: err, Duration: now.Sub(begin), Attempts: attempts, Context: ctx, Lease: l}
	if !firstFail.IsZero() {
		e.Waited = now.Sub(firstFail)
	}
	o(e)
}

// lossReason classifies a lost lease's error.
func lossReason(fixed bool, err error) LossReason {
	switch {
	case fixed:
		return LossExpired
	case errors.Is(err, ErrNotHeld):
		return LossRefused
	}
	return LossUnconfirmed
}

// Observers returns an Observer that passes every event to each of obs in
// order (nil entries are skipped), to attach metrics and logs together.
func Observers(obs ...Observer) Observer {
	var list []Observer
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	return func(e Event) {
		for _, o := range list {
			o(e)
		}
	}
}

// LogObserver returns an Observer that writes events to logger: lost leases,
// refused renewals and backend failures at Warn, renewals that failed but
// may still succeed before the deadline at Info, and the rest (acquisitions,
// confirmed renewals, releases) at Debug. Keys are left out of the records
// unless logKeys is true: they are the caller's data (account and order ids).
// Fencing tokens and owners are never logged. A nil logger uses
// slog.Default().
func LogObserver(logger *slog.Logger, logKeys bool) Observer {
	if logger == nil {
		logger = slog.Default()
	}
	return (&logObserver{log: logger, keys: logKeys}).observe
}

type logObserver struct {
	log  *slog.Logger
	keys bool
}

func (o *logObserver) observe(e Event) {
	level, msg := slog.LevelDebug, ""
	switch e.Kind {
	case EventAcquire:
		msg = "lock acquired"
		switch {
		case e.Err == nil:
		case errors.Is(e.Err, ErrNotAcquired), errors.Is(e.Err, context.Canceled), errors.Is(e.Err, context.DeadlineExceeded):
			msg = "lock not acquired"
		default:
			level, msg = slog.LevelWarn, "lock acquire failed"
		}
	case EventRenew:
		msg = "lease renewed"
		switch {
		case e.Err == nil:
		case errors.Is(e.Err, ErrNotHeld):
			level, msg = slog.LevelWarn, "lease renewal refused"
		default:
			level, msg = slog.LevelInfo, "lease renewal failed, retrying until the deadline"
		}
	case EventLoss:
		level, msg = slog.LevelWarn, "lease lost"
	case EventRelease:
		msg = "lease released"
		if e.Err != nil {
			level, msg = slog.LevelWarn, "lease release failed; the lock expires after its TTL"
		}
	default:
		return
	}
	ctx := context.Background()
	if !o.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 6)
	if o.keys {
		attrs = append(attrs, slog.String("key", e.Key))
	}
	attrs = append(attrs, slog.Duration("duration", e.Duration))
	switch e.Kind {
	case EventAcquire:
		attrs = append(attrs, slog.Duration("waited", e.Waited), slog.Int("attempts", e.Attempts))
	case EventLoss:
		attrs = append(attrs, slog.String("reason", string(e.Reason)))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	o.log.LogAttrs(ctx, level, msg, attrs...)
}
