package sqlfence_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// exampleDatabase returns the URL of a PostgreSQL schema of the example's
// own (LATCHKEY_POSTGRES_URL's database, or the local test database), so that
// examples running at once do not share tables, and a function dropping it.
func exampleDatabase() (string, func()) {
	url := os.Getenv("LATCHKEY_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "example_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return url, func() {}
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "CREATE SCHEMA "+schema)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema, func() {
		if conn, err := pgx.Connect(ctx, url); err == nil {
			conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(ctx)
		}
	}
}

// A fenced read-modify-write inside the caller's pgx transaction, on
// PostgreSQL without database/sql: the lock and the guard share one pool;
// Read claims the row with the lease's token and locks it until commit, and
// the write follows in the same transaction.
func ExampleGuard_InPgx() {
	ctx := context.Background()
	url, drop := exampleDatabase()
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	pool.Exec(ctx, `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT, fence_token BIGINT NOT NULL DEFAULT 0)`)
	pool.Exec(ctx, `INSERT INTO accounts (id, balance) VALUES ('acct-1', 1000)`)

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
	pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 'acct-1'`).Scan(&balance)
	fmt.Println(err, balance)
	// Output: <nil> 700
}
