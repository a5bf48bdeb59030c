package state_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/state"
)

func exampleDB() (*sql.DB, func()) {
	dir, _ := os.MkdirTemp("", "state")
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db"))
	mustExec(db, `CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL, paid_by TEXT)`)
	mustExec(db, `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 0)`)
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

// A payment callback arrives twice: the first moves the order to PAID, the
// second is told it is a duplicate; a cancel after payment is illegal.
func ExampleMachine_Move() {
	ctx := context.Background()
	db, done := exampleDB()
	defer done()
	mustExec(db, `INSERT INTO orders (id, status) VALUES ('o-1', 'UNPAID')`)

	orders, err := state.NewMachine(db, "orders", []state.Transition{
		{From: "UNPAID", To: "PAID"},
		{From: "UNPAID", To: "CANCELLED"},
		{From: "PAID", To: "REFUNDED"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		res, err := orders.Move(ctx, "o-1", "PAID", state.Values{"paid_by": "card"})
		fmt.Println(res, err)
	}
	_, err = orders.Move(ctx, "o-1", "CANCELLED", nil)
	fmt.Println(errors.Is(err, state.ErrIllegal))
	// Output:
	// applied <nil>
	// duplicate <nil>
	// true
}

// A read-modify-write under optimistic locking: fn runs on a fresh read,
// again if another writer got in between.
func ExampleOptimistic_Update() {
	ctx := context.Background()
	db, done := exampleDB()
	defer done()
	mustExec(db, `INSERT INTO accounts (id, balance) VALUES ('acct-7', 100)`)

	accounts, err := state.NewOptimistic(db, "accounts")
	if err != nil {
		fmt.Println(err)
		return
	}
	var balance int64
	err = accounts.Update(ctx, "acct-7", state.Into{"balance": &balance}, func() (state.Values, error) {
		if balance < 30 {
			return nil, errors.New("insufficient funds")
		}
		return state.Values{"balance": balance - 30}, nil
	})
	var version int64
	if err := db.QueryRow(`SELECT balance, version FROM accounts WHERE id = 'acct-7'`).Scan(&balance, &version); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(err, balance, version)
	// Output: <nil> 70 1
}

// mustExec runs q for an example's setup, which cannot go on without it.
func mustExec(db *sql.DB, q string) {
	if _, err := db.Exec(q); err != nil {
		panic(err)
	}
}
