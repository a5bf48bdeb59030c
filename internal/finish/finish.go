// Package finish is the one policy for finishing a claim after its effect
// happened: idem's Record and Release, dedup's Done and Release.
//
// By then the payment went through (or failed cleanly), so giving up on the
// first store error is expensive: a lost Record turns every retry of the
// request into "in progress" (a 409) until the in-progress deadline passes,
// and a lost Release makes a declined payment wait just as long before it
// can be tried again. A store error at that moment is most often a blip (a
// dropped connection, a failover), so the finish is sent again, twice, after
// 50 ms and 100 ms. It is not sent again when the claim is lost (someone
// took the key over: asking again cannot change that), nor once the context
// ends; the whole finish runs on a context detached from the caller's
// cancellation, so a client that hangs up cannot leave the outcome
// unrecorded, and bounded by Timeout.
//
// A retry after a failure the store did apply finds the claim gone and
// reports it lost: the caller sees an error, never a second effect.
package finish

import (
	"context"
	"errors"
	"time"
)

const (
	// Timeout bounds a finish, its retries included.
	Timeout = 10 * time.Second
	// Attempts is how many times the store is asked in all.
	Attempts = 3
	// Backoff is the pause before the second attempt; the n-th retry waits
	// n times as long.
	Backoff = 50 * time.Millisecond
)

// Detached returns a context that keeps ctx's values but not its
// cancellation, bounded by Timeout.
func Detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), Timeout)
}

// Retry calls fn until it succeeds, fails with an error final reports as
// final, has been called Attempts times, or ctx ends during a pause; it
// returns fn's last error, joined with ctx's if that cut the retries short.
func Retry(ctx context.Context, fn func(context.Context) error, final func(error) bool) error {
	var err error
	for attempt := range Attempts {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * Backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return errors.Join(err, ctx.Err())
			case <-t.C:
			}
		}
		if err = fn(ctx); err == nil || final(err) {
			return err
		}
	}
	return err
}
