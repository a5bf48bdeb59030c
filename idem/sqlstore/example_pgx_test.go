package sqlstore_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// The same ledger on PostgreSQL through a pgx pool, without database/sql:
// one charge, however often the request arrives, and each replay one round
// trip.
func ExampleNewPgx() {
	ctx := context.Background()
	url, drop := testsvc.ExamplePostgres()
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	store, err := sqlstore.NewPgx(pool)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	charges := 0
	for range 3 {
		id, err := idem.Do(ctx, store, "order-1001/pay", func(context.Context) (string, error) {
			charges++
			return fmt.Sprintf("ch_%d", charges), nil
		})
		fmt.Println(id, err)
	}
	fmt.Println("dialect:", store.Dialect(), "charges:", charges)
	// Output:
	// ch_1 <nil>
	// ch_1 <nil>
	// ch_1 <nil>
	// dialect: postgres charges: 1
}
