package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

type Charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// A payment request delivered three times (double click, gateway retry,
// redelivery) charges the card once; every copy gets the first charge.
func ExampleDo() {
	ctx := context.Background()
	store := memstore.New() // redisstore or sqlstore when more than one process runs
	charges := 0
	charge := func(ctx context.Context) (Charge, error) {
		charges++
		return Charge{ID: fmt.Sprintf("ch_%d", charges), Amount: 100}, nil
	}
	for range 3 {
		c, err := idem.Do(ctx, store, "order-1001/pay", charge, idem.WithFingerprint("amount=100"))
		fmt.Println(c.ID, c.Amount, err)
	}
	fmt.Println("charges:", charges)
	// Output:
	// ch_1 100 <nil>
	// ch_1 100 <nil>
	// ch_1 100 <nil>
	// charges: 1
}

// A form gets a one-time token when it is shown; the first submit consumes
// it, the double-clicked second one is refused.
func ExampleIssueToken() {
	ctx := context.Background()
	store := memstore.New()
	tok, _ := idem.IssueToken(ctx, store, "user-42/checkout", 10*time.Minute)

	fmt.Println(idem.ConsumeToken(ctx, store, tok, "user-42/checkout"))
	err := idem.ConsumeToken(ctx, store, tok, "user-42/checkout")
	fmt.Println(errors.Is(err, idem.ErrTokenInvalid))
	// Output:
	// <nil>
	// true
}

// An observer sees each call's outcome (never its key): here a charge, its
// retry, and a retry of the same key for another amount.
func ExampleWithObserver() {
	ctx, store := context.Background(), memstore.New()
	log := idem.WithObserver(func(_ context.Context, e idem.Event) {
		fmt.Println(e.Outcome, e.Err != nil)
	})
	charge := func(context.Context) (Charge, error) { return Charge{ID: "ch_1", Amount: 100}, nil }

	_, _ = idem.Do(ctx, store, "order-42", charge, log, idem.WithFingerprint("amount=100"))
	_, _ = idem.Do(ctx, store, "order-42", charge, log, idem.WithFingerprint("amount=100"))
	_, _ = idem.Do(ctx, store, "order-42", charge, log, idem.WithFingerprint("amount=999"))
	// Output:
	// executed false
	// replayed false
	// mismatch true
}
