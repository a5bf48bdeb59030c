package pgxstate_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/state"
	"github.com/latchkey-go/latchkey/state/pgxstate"
)

// A payment callback arrives twice. Each copy moves the order to PAID and
// writes a receipt in one pgx transaction; the second copy is told the move
// is a duplicate and writes nothing.
func ExampleNewMachine() {
	ctx := context.Background()
	url, drop := testsvc.ExamplePostgres()
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	mustExec(ctx, pool, `CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`)
	mustExec(ctx, pool, `CREATE TABLE receipts (order_id TEXT NOT NULL)`)
	mustExec(ctx, pool, `INSERT INTO orders VALUES ('o-1', 'UNPAID')`)

	orders, err := pgxstate.NewMachine(pool, "orders", []state.Transition{{From: "UNPAID", To: "PAID"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			res, err := orders.On(pgxstate.Conn(tx)).Move(ctx, "o-1", "PAID", nil)
			fmt.Println(res, err)
			if err != nil || res == state.Duplicate {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO receipts VALUES ('o-1')`)
			return err
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	var receipts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM receipts`).Scan(&receipts); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("receipts:", receipts)
	// Output:
	// applied <nil>
	// duplicate <nil>
	// receipts: 1
}

// mustExec runs q for an example's setup, which cannot go on without it.
func mustExec(ctx context.Context, pool *pgxpool.Pool, q string) {
	if _, err := pool.Exec(ctx, q); err != nil {
		panic(err)
	}
}
