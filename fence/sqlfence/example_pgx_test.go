package sqlfence_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// A fenced read-modify-write inside the caller's pgx transaction, on
// PostgreSQL without database/sql: the lock and the guard share one pool;
// Read claims the row with the lease's token and locks it until commit, and
// the write follows in the same transaction.
func ExampleGuard_InPgx() {
	ctx := context.Background()
	url, drop := testsvc.ExamplePostgres()
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	mustExecPgx(ctx, pool, `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT, fence_token BIGINT NOT NULL DEFAULT 0)`)
	mustExecPgx(ctx, pool, `INSERT INTO accounts (id, balance) VALUES ('acct-1', 1000)`)

	locker, err := sqllock.NewPgx(ctx, pool, sqllock.WithTable("locks"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	accounts, err := sqlfence.NewPgx(pool, "accounts")
	if err != nil {
		fmt.Println(err)
		return
	}

	err = lock.Do(ctx, locker, "acct-1", func(ctx context.Context, lease *lock.Lease) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			acct := accounts.InPgx(tx)
			var balance int64
			if err := acct.Read(ctx, lease, "acct-1", sqlfence.Into{"balance": &balance}); err != nil {
				return err // fence.ErrStale: a newer holder has claimed the account
			}
			if balance < 300 {
				return errInsufficient
			}
			return acct.Update(ctx, lease, "acct-1", sqlfence.Values{"balance": balance - 300})
		})
	})
	var balance int64
	if err := pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 'acct-1'`).Scan(&balance); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(err, balance)
	// Output: <nil> 700
}

// mustExecPgx runs q for an example's setup, which cannot go on without it.
func mustExecPgx(ctx context.Context, pool *pgxpool.Pool, q string) {
	if _, err := pool.Exec(ctx, q); err != nil {
		panic(err)
	}
}
