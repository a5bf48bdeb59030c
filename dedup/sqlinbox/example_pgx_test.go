package sqlinbox_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// A broker delivers one payment message twice. The inbox on a pgx pool
// inserts its id in the handler's pgx transaction, with the credit: the
// second copy is a duplicate, and the account is credited once.
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
	mustExec(ctx, pool, `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)`)
	mustExec(ctx, pool, `INSERT INTO accounts VALUES ('acct-1', 0)`)
	inbox, err := sqlinbox.NewPgx(pool)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := inbox.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	credit := func(ctx context.Context, tx pgx.Tx, m dedup.Message) error {
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 100 WHERE id = 'acct-1'`)
		return err
	}
	for range 2 {
		fmt.Println(inbox.Process(ctx, dedup.Message{ID: "pay-42"}, credit))
	}
	var balance int64
	if err := pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 'acct-1'`).Scan(&balance); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("balance:", balance)
	// Output:
	// processed <nil>
	// duplicate <nil>
	// balance: 100
}

// mustExec runs q for an example's setup, which cannot go on without it.
func mustExec(ctx context.Context, pool *pgxpool.Pool, q string) {
	if _, err := pool.Exec(ctx, q); err != nil {
		panic(err)
	}
}
