package lock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// Acquire a lock, pass its fencing token to the resource, release it.
func Example() {
	ctx := context.Background()
	var locker lock.Locker = memlock.New() // or sqllock, redislock, ...

	lease, err := locker.Acquire(ctx, "inventory:sku-42", lock.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	defer lease.Release(ctx)

	// Hand the token to the storage you write to, so it can refuse a write
	// from a holder whose lease has passed to someone else.
	fmt.Println("holding", lease.Key(), "token > 0:", lease.Token() > 0)
	// Output: holding inventory:sku-42 token > 0: true
}

// Do runs a function under the lock; its context is cancelled if the lease
// is lost, and the lock is released afterwards.
func ExampleDo() {
	ctx := context.Background()
	locker := memlock.New()

	err := lock.Do(ctx, locker, "account:7", func(ctx context.Context, lease *lock.Lease) error {
		// ... transfer money, checking ctx between steps ...
		return ctx.Err()
	})
	fmt.Println("err:", err)
	// Output: err: <nil>
}

// WithWait(0) tries exactly once: a held lock answers ErrNotAcquired at once.
func ExampleWithWait() {
	ctx := context.Background()
	locker := memlock.New()

	cron, _ := locker.Acquire(ctx, "cron:nightly-report")
	defer cron.Release(ctx)

	_, err := locker.Acquire(ctx, "cron:nightly-report", lock.WithWait(0))
	fmt.Println(errors.Is(err, lock.ErrNotAcquired))
	// Output: true
}

// A lease's Done channel closes when the lock can no longer be trusted.
func ExampleLease_Done() {
	ctx := context.Background()
	locker := memlock.New()

	lease, _ := locker.Acquire(ctx, "job:1", lock.WithTTL(50*time.Millisecond), lock.WithFixedTTL())
	<-lease.Done() // a fixed lease simply expires
	fmt.Println(errors.Is(lease.Err(), lock.ErrLeaseLost))
	fmt.Println(errors.Is(lease.Release(ctx), lock.ErrNotHeld))
	// Output:
	// true
	// true
}

// An HTTP handler that charges a card under a lock tells Do's outcomes apart:
// the charge failed (answer its error), the charge succeeded but the lease was
// lost meanwhile (the money moved: answer success and alert, never have it
// retried), or the lock was not taken (busy: 409 with Retry-After).
func ExampleDo_handler() {
	locker := memlock.New()
	errDeclined := errors.New("card declined")
	charge := func(ctx context.Context, order string) error {
		switch order {
		case "declined":
			return errDeclined
		case "slow":
			<-ctx.Done() // the lease ran out while the bank answered
		}
		return nil // charged
	}
	alert := func(format string, args ...any) { fmt.Printf("alert: "+format+"\n", args...) }

	handler := func(w http.ResponseWriter, r *http.Request) {
		order := r.URL.Query().Get("order")
		err := lock.Do(r.Context(), locker, "order:"+order, func(ctx context.Context, lease *lock.Lease) error {
			return charge(ctx, order)
		}, lock.WithTTL(50*time.Millisecond), lock.WithFixedTTL(), lock.WithWait(0))
		var (
			lost *lock.LostError
			held *lock.HeldError
		)
		switch {
		case err == nil:
			fmt.Fprintln(w, "charged")
		case errors.As(err, &lost) && lost.Succeeded():
			// The effect happened: an error now would have the client
			// charge again. The work may have overlapped another
			// holder's; fencing tokens keep the writes in order.
			alert("order %s charged, but %v", order, lost.Lost)
			fmt.Fprintln(w, "charged")
		case errors.Is(err, errDeclined):
			http.Error(w, "card declined", http.StatusPaymentRequired)
		case errors.As(err, &held): // also errors.Is(err, lock.ErrNotAcquired)
			secs := int(held.TimeLeft.Round(time.Second) / time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
			http.Error(w, "order is being processed", http.StatusConflict)
		case errors.Is(err, lock.ErrNotAcquired): // the holder's time left is unknown
			w.Header().Set("Retry-After", "1")
			http.Error(w, "order is being processed", http.StatusConflict)
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			w.Header().Set("Retry-After", "1")
			http.Error(w, "try again", http.StatusServiceUnavailable)
		default:
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}

	busy, _ := locker.Acquire(context.Background(), "order:busy", lock.WithTTL(30*time.Second))
	defer busy.Release(context.Background())
	for _, order := range []string{"ok", "declined", "slow", "busy"} {
		rec := httptest.NewRecorder()
		handler(rec, httptest.NewRequest("POST", "/charge?order="+order, nil))
		fmt.Printf("%s: %d %s", order, rec.Code, rec.Body)
		if ra := rec.Header().Get("Retry-After"); ra != "" {
			fmt.Println("  Retry-After:", ra)
		}
	}
	// Output:
	// ok: 200 charged
	// declined: 402 card declined
	// alert: order slow charged, but lock: lease lost: fixed TTL expired
	// slow: 200 charged
	// busy: 409 order is being processed
	//   Retry-After: 30
}
