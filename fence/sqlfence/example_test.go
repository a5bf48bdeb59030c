package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// openBank opens a SQLite file in a new directory with one account, acct-1,
// holding 1000; close removes both.
func openBank() (db *sql.DB, close func()) {
	dir, _ := os.MkdirTemp("", "sqlfence")
	db, _ = sql.Open("sqlite", "file:"+filepath.Join(dir, "bank.db")+"?_pragma=busy_timeout(5000)")
	mustExec(db, `CREATE TABLE accounts (id TEXT PRIMARY KEY, balance BIGINT, fence_token BIGINT NOT NULL DEFAULT 0)`)
	mustExec(db, `INSERT INTO accounts (id, balance) VALUES ('acct-1', 1000)`)
	return db, func() { db.Close(); os.RemoveAll(dir) }
}

func balanceOf(db *sql.DB) (b int64) {
	if err := db.QueryRow(`SELECT balance FROM accounts WHERE id = 'acct-1'`).Scan(&b); err != nil {
		panic(err)
	}
	return b
}

var errInsufficient = errors.New("insufficient funds")

// A payment handler under a lock: in one transaction, claim the row and read
// the balance (Read), decide, write (Update), commit. The claim puts the
// holder's token on the row before the read, so no older holder's write can
// land between the read and the write.
func ExampleGuard_Read() {
	ctx := context.Background()
	db, closeDB := openBank()
	defer closeDB()
	accounts, err := sqlfence.New(db, "accounts")
	if err != nil {
		fmt.Println(err)
		return
	}
	locker := memlock.New() // or sqllock, redislock, ...

	pay := func(ctx context.Context, lease *lock.Lease, amount int64) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		acct := accounts.In(tx)
		var balance int64
		if err := acct.Read(ctx, lease, "acct-1", sqlfence.Into{"balance": &balance}); err != nil {
			return err // fence.ErrStale: a newer holder has claimed the account
		}
		if balance < amount {
			return errInsufficient
		}
		if err := acct.Update(ctx, lease, "acct-1", sqlfence.Values{"balance": balance - amount}); err != nil {
			return err
		}
		return tx.Commit()
	}

	err = lock.Do(ctx, locker, "acct-1", func(ctx context.Context, lease *lock.Lease) error {
		return pay(ctx, lease, 300)
	})
	fmt.Println(err, balanceOf(db))
	// Output: <nil> 700
}

// Why the read must claim: the fresh holder reads, the paused stale holder
// wakes and writes, the fresh holder writes from its read. With a plain
// read the stale write would be applied (the row still carries an old
// token) and then erased; with Read the fresh holder's token is on the row
// first, so the stale write is refused and every debit the account
// acknowledged shows in its balance.
func Example() {
	ctx := context.Background()
	db, closeDB := openBank()
	defer closeDB()
	accounts, _ := sqlfence.New(db, "accounts")
	locker := memlock.New()

	old, _ := locker.Acquire(ctx, "acct-1")
	var seen int64
	if err := accounts.Read(ctx, old, "acct-1", sqlfence.Into{"balance": &seen}); err != nil { // 1000
		fmt.Println(err)
		return
	}
	locker.Revoke("acct-1") // old's holder pauses; its lease is lost

	next, _ := locker.Acquire(ctx, "acct-1")
	defer next.Release(ctx)
	var balance int64
	if err := accounts.Read(ctx, next, "acct-1", sqlfence.Into{"balance": &balance}); err != nil { // 1000, and next's token is on the row
		fmt.Println(err)
		return
	}

	err := accounts.Update(ctx, old, "acct-1", sqlfence.Values{"balance": seen - 100}) // old wakes up
	fmt.Println("old holder refused:", errors.Is(err, fence.ErrStale))
	err = accounts.Update(ctx, next, "acct-1", sqlfence.Values{"balance": balance - 300})
	fmt.Println("new holder:", err, balanceOf(db))
	// Output:
	// old holder refused: true
	// new holder: <nil> 700
}

// A relative update needs no read: "balance = balance + $1", the amount a
// parameter.
func ExampleAdd() {
	ctx := context.Background()
	db, closeDB := openBank()
	defer closeDB()
	accounts, _ := sqlfence.New(db, "accounts")

	fmt.Println(accounts.Update(ctx, fence.Token(7), "acct-1", sqlfence.Values{"balance": sqlfence.Add(-250)}))
	fmt.Println(balanceOf(db))
	// Output:
	// <nil>
	// 750
}

// A claim raises the row's token alone, for a holder that reads the row's
// data with statements of its own in the same transaction.
func ExampleGuard_Claim() {
	ctx := context.Background()
	db, closeDB := openBank()
	defer closeDB()
	accounts, _ := sqlfence.New(db, "accounts")

	tx, _ := db.BeginTx(ctx, nil)
	defer tx.Rollback()
	fmt.Println(accounts.In(tx).Claim(ctx, fence.Token(9), "acct-1"))
	var balance int64
	if err := tx.QueryRow(`SELECT balance FROM accounts WHERE id = 'acct-1'`).Scan(&balance); err != nil { // safe: after the claim
		fmt.Println(err)
		return
	}
	fmt.Println(balance, tx.Commit())
	fmt.Println(errors.Is(accounts.Claim(ctx, fence.Token(8), "acct-1"), fence.ErrStale))
	// Output:
	// <nil>
	// 1000 <nil>
	// true
}

// mustExec runs q for an example's setup, which cannot go on without it.
func mustExec(db *sql.DB, q string) {
	if _, err := db.Exec(q); err != nil {
		panic(err)
	}
}
