package dedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/internal/finish"
)

// Outcome is what Process did with one delivery.
type Outcome int

const (
	// OutcomeProcessed: this copy was claimed and the handler succeeded (the error
	// is nil, or ErrNotRecorded when marking it done failed).
	OutcomeProcessed Outcome = iota + 1
	// OutcomeDuplicate: the id was done already; the handler did not run.
	OutcomeDuplicate
	// OutcomeBusy: another copy is processing; the handler did not run and the
	// error is an [*InProgressError].
	OutcomeBusy
	// OutcomeFailed: the handler ran and returned an error; the claim was released.
	OutcomeFailed
	// OutcomeRejected: nothing ran because of an invalid id or a store error.
	OutcomeRejected
)

func (o Outcome) String() string {
	switch o {
	case OutcomeProcessed:
		return "processed"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeBusy:
		return "busy"
	case OutcomeFailed:
		return "failed"
	case OutcomeRejected:
		return "rejected"
	}
	return "invalid"
}

// Deduper runs handlers through the claim -> handle -> done cycle on a Store.
// It is safe for concurrent use and holds no goroutines.
type Deduper struct {
	store     Store
	ttl       time.Duration
	retention time.Duration
	observe   Observer // nil: none
}

// New returns a Deduper on s. It fails with ErrInvalid when s is nil or an
// option is out of range.
func New(s Store, opts ...Option) (*Deduper, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalid)
	}
	c := newConfig(opts)
	if c.invalid != nil {
		return nil, c.invalid
	}
	return &Deduper{store: s, ttl: c.ttl, retention: c.retention, observe: c.observe}, nil
}

// Wrap returns next behind the deduplicator: a handler for any broker that
// runs next at most once per message id within the retention window (see
// Process for the errors it returns; [ShouldAck] sorts them).
func (d *Deduper) Wrap(next Handler) Handler {
	return func(ctx context.Context, m Message) error {
		_, err := d.Process(ctx, m, next)
		return err
	}
}

// Process runs one delivery through the cycle and says what happened:
//
//   - OutcomeProcessed, nil: claimed, next succeeded, id marked done. Acknowledge.
//   - OutcomeProcessed, ErrNotRecorded: next succeeded but the id could not be
//     marked done. Acknowledge (the effect happened).
//   - OutcomeDuplicate, nil: done earlier; next did not run. Acknowledge.
//   - OutcomeBusy, *InProgressError: another copy holds the claim; next did not
//     run. Do not acknowledge; redeliver after RetryAfter.
//   - OutcomeFailed, next's error (joined with the Release error, if any): the
//     claim was released (or will expire). Do not acknowledge.
//   - OutcomeRejected, ErrInvalidID, ErrInvalid, the store's error or ctx's error:
//     nothing ran. Do not acknowledge.
//
// next runs under a context that ends at the processing TTL, measured from
// before the claim was sent, so it is cancelled before another consumer can
// take the id over. If next panics, the claim is released and the panic goes
// on.
func (d *Deduper) Process(ctx context.Context, m Message, next Handler) (Outcome, error) {
	if d.observe == nil {
		e := d.process(ctx, m, next)
		return e.Outcome, e.Err
	}
	begin := time.Now()
	e := d.process(ctx, m, next)
	e.Duration = time.Since(begin)
	d.observe(ctx, e)
	return e.Outcome, e.Err
}

// process is Process, reporting also the error of the Done or Release that
// followed the handler.
func (d *Deduper) process(ctx context.Context, m Message, next Handler) Event {
	if next == nil {
		return Event{Outcome: OutcomeRejected, Err: fmt.Errorf("%w: nil handler", ErrInvalid)}
	}
	if err := CheckID(m.ID); err != nil {
		return Event{Outcome: OutcomeRejected, Err: err}
	}
	start := time.Now()
	c, err := d.store.Claim(ctx, m.ID, d.ttl)
	if err != nil {
		return Event{Outcome: OutcomeRejected, Err: err}
	}
	switch c.State {
	case Claimed:
	case Done:
		return Event{Outcome: OutcomeDuplicate}
	case InProgress:
		return Event{Outcome: OutcomeBusy, Err: &InProgressError{RetryAfter: c.RetryAfter}}
	default:
		return Event{Outcome: OutcomeRejected, Err: fmt.Errorf("dedup: store returned invalid claim state %d", c.State)}
	}
	if err := d.run(ctx, start, m, c.Token, next); err != nil {
		if rerr := finishClaim(ctx, func(fctx context.Context) error { return d.store.Release(fctx, m.ID, c.Token) }); rerr != nil {
			return Event{Outcome: OutcomeFailed, Err: errors.Join(err, fmt.Errorf("dedup: release: %w", rerr)), StoreErr: rerr}
		}
		return Event{Outcome: OutcomeFailed, Err: err}
	}
	if err := finishClaim(ctx, func(fctx context.Context) error { return d.store.Done(fctx, m.ID, c.Token, d.retention) }); err != nil {
		return Event{Outcome: OutcomeProcessed, Err: fmt.Errorf("%w: %w", ErrNotRecorded, err), StoreErr: err}
	}
	return Event{Outcome: OutcomeProcessed}
}

// run calls next under the claim's deadline, releasing the claim if next
// panics.
func (d *Deduper) run(ctx context.Context, start time.Time, m Message, token string, next Handler) (err error) {
	hctx, cancel := context.WithDeadline(ctx, start.Add(d.ttl))
	defer cancel()
	ok := false
	defer func() {
		if !ok {
			_ = finishClaim(ctx, func(fctx context.Context) error { return d.store.Release(fctx, m.ID, token) })
		}
	}()
	err = next(hctx, m)
	ok = true
	return err
}

// finishClaim runs fn detached from ctx's cancellation and bounded by
// FinishTimeout, retrying a store error (not ErrClaimLost) twice, after 50
// and 100 ms, as idem's Record and Release do.
func finishClaim(ctx context.Context, fn func(context.Context) error) error {
	fctx, cancel := finish.Detached(ctx)
	defer cancel()
	return finish.Retry(fctx, fn, func(err error) bool { return errors.Is(err, ErrClaimLost) })
}
