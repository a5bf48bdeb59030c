package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// holders opens the database twice, one handle per lock holder, as two
// processes would, and creates an account table with one account at 1000.
func holders(t *testing.T, d database) (stale, fresh *sql.DB, table string) {
	t.Helper()
	dsn := d.dsn(t)
	open := func() *sql.DB { return testsvc.OpenDB(t, d.driver, dsn, testsvc.MaxOpenConns(1)) }
	stale, fresh = open(), open()
	table = inventoryTable(t, stale)
	if _, err := stale.Exec(fmt.Sprintf("INSERT INTO %s (id, qty) VALUES ('acct', 1000)", table)); err != nil {
		t.Fatal(err)
	}
	return stale, fresh, table
}

// guardOn is sqlfence.New, failing t on an error.
func guardOn(t *testing.T, db *sql.DB, table string, opts ...sqlfence.Option) *sqlfence.Guard {
	t.Helper()
	g, err := sqlfence.New(db, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func balance(t *testing.T, db *sql.DB, table string) int64 {
	t.Helper()
	var b int64
	if err := db.QueryRow(fmt.Sprintf("SELECT qty FROM %s WHERE id = 'acct'", table)).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// The lost update of a fenced read-modify-write, forced step by step: the
// stale holder (token 1) reads 1000 and is paused; the fresh holder (token 2)
// reads 1000; the stale holder wakes and debits 100; the fresh holder debits
// 300 from its read. Every debit the account acknowledged must show in its
// balance.

// TestWriteOnlyFencingLosesAnUpdate shows that fencing the writes alone loses
// the stale holder's acknowledged debit: both writes are applied, the
// balance is 700 instead of 600. It proves the interleaving below is the one
// that does damage.
func TestWriteOnlyFencingLosesAnUpdate(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			staleDB, freshDB, table := holders(t, d)
			stale, fresh := guardOn(t, staleDB, table), guardOn(t, freshDB, table)
			staleRead := balance(t, staleDB, table) // then paused
			freshRead := balance(t, freshDB, table)
			if err := stale.Update(ctx, fence.Token(1), "acct", sqlfence.Values{"qty": staleRead - 100}); err != nil {
				t.Fatalf("stale holder's write: %v", err)
			}
			if err := fresh.Update(ctx, fence.Token(2), "acct", sqlfence.Values{"qty": freshRead - 300}); err != nil {
				t.Fatalf("fresh holder's write: %v", err)
			}
			if got := balance(t, freshDB, table); got != 700 {
				t.Fatalf("balance %d: the interleaving did not lose the stale holder's debit (want 700, not 600)", got)
			}
		})
	}
}

// TestReadClaimsBeforeTheStaleWrite is the same interleaving with the fresh
// holder's read made by Guard.Read, on its own and inside a transaction: the
// stale holder's debit is refused, the fresh holder's applied, and the
// balance shows exactly the debits that were acknowledged.
func TestReadClaimsBeforeTheStaleWrite(t *testing.T) {
	for _, d := range databases {
		for _, inTx := range []bool{false, true} {
			name := d.name
			if inTx {
				name += "/transaction"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				readClaimsBeforeTheStaleWrite(t, d, inTx)
			})
		}
	}
}

// readClaimsBeforeTheStaleWrite forces the interleaving on d, with the
// fresh holder's read and write in a transaction if inTx.
func readClaimsBeforeTheStaleWrite(t *testing.T, d database, inTx bool) {
	ctx := t.Context()
	staleDB, freshDB, table := holders(t, d)
	stale, fresh := guardOn(t, staleDB, table), guardOn(t, freshDB, table)

	var staleRead int64
	if err := stale.Read(ctx, fence.Token(1), "acct", sqlfence.Into{"qty": &staleRead}); err != nil {
		t.Fatalf("stale holder's read: %v", err)
	} // then paused

	var tx *sql.Tx
	if inTx {
		var err error
		if tx, err = freshDB.BeginTx(ctx, nil); err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		fresh = fresh.In(tx)
	}
	var freshRead int64
	if err := fresh.Read(ctx, fence.Token(2), "acct", sqlfence.Into{"qty": &freshRead}); err != nil {
		t.Fatalf("fresh holder's read: %v", err)
	}
	if freshRead != 1000 {
		t.Fatalf("fresh holder read %d", freshRead)
	}

	// The stale holder wakes and writes. Inside the fresh holder's
	// transaction the row is locked, so its write waits for the commit;
	// it must be refused either way.
	staleErr := make(chan error, 1)
	go func() {
		staleErr <- stale.Update(ctx, fence.Token(1), "acct", sqlfence.Values{"qty": staleRead - 100})
	}()
	if inTx {
		waitBlocked(t, d, freshDB, table)
	} else if err := <-staleErr; !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale holder's write after the claim: %v, want fence.ErrStale", err)
	}
	if err := fresh.Update(ctx, fence.Token(2), "acct", sqlfence.Values{"qty": freshRead - 300}); err != nil {
		t.Fatalf("fresh holder's write: %v", err)
	}
	if inTx {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-staleErr; !errors.Is(err, fence.ErrStale) {
			t.Fatalf("stale holder's write during the transaction: %v, want fence.ErrStale", err)
		}
	}
	if got := balance(t, staleDB, table); got != 700 {
		t.Fatalf("balance %d, want 1000 - 300 = 700 (the stale debit was refused)", got)
	}
}

// waitBlocked waits until the stale holder's UPDATE on table waits for the
// fresh holder's row lock, on PostgreSQL and MySQL, where the server shows
// it. SQLite shows nothing: its writer waits in its busy handler or has not
// started, and the test's outcome is the same either way.
func waitBlocked(t *testing.T, d database, db *sql.DB, table string) {
	t.Helper()
	// The stale write under way is enough on MySQL: while the row is locked
	// it cannot finish. (information_schema.innodb_trx does not always list
	// it on MariaDB 10.11; the process list shows every statement being
	// executed.)
	waiting := `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?`
	switch {
	case d.name == "postgres":
		waiting = `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`
	case !d.isMySQL():
		return
	}
	// db's one connection may be in the transaction: ask on another.
	probe, err := sql.Open(d.driver, d.dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := probe.QueryRow(waiting, "UPDATE "+table+" %").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the stale holder's write never waited for the row lock")
		}
	}
}

// TestAddLosesNothing: relative updates need no read, so the same
// interleaving keeps both debits.
func TestAddLosesNothing(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			staleDB, freshDB, table := holders(t, d)
			stale, fresh := guardOn(t, staleDB, table), guardOn(t, freshDB, table)
			if err := stale.Update(ctx, fence.Token(1), "acct", sqlfence.Values{"qty": sqlfence.Add(-100)}); err != nil {
				t.Fatal(err)
			}
			if err := fresh.Update(ctx, fence.Token(2), "acct", sqlfence.Values{"qty": sqlfence.Add(int64(-300)), "note": "debit"}); err != nil {
				t.Fatal(err)
			}
			if err := stale.Update(ctx, fence.Token(1), "acct", sqlfence.Values{"qty": sqlfence.Add(-100)}); !errors.Is(err, fence.ErrStale) {
				t.Fatalf("stale relative update after a newer token: %v", err)
			}
			if got := balance(t, staleDB, table); got != 600 {
				t.Fatalf("balance %d, want 600", got)
			}
		})
	}
}

func TestClaimAndRead(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		g := guardOn(t, db, table)
		if _, err := db.Exec(fmt.Sprintf("INSERT INTO %s (id, qty, note) VALUES ('a', 5, 'x')", table)); err != nil {
			t.Fatal(err)
		}
		checkClaimsAndReads(t, db, g, table)
		checkMissingRowsNotClaimed(t, db, g, table)

		// A rolled-back transaction takes its claim with it.
		ctx := t.Context()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var qty int64
		if err := g.In(tx).Read(ctx, fence.Token(8), "a", sqlfence.Into{"qty": &qty}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if _, tok := row(t, db, g, table, "a"); tok != 4 {
			t.Fatalf("token %d after rollback, want 4", tok)
		}
	})
}

// checkClaimsAndReads claims and reads row a (qty 5, note x) with tokens
// 3, 2, 4 and 3: each raises the row's token or is refused as stale,
// reading nothing.
func checkClaimsAndReads(t *testing.T, db *sql.DB, g *sqlfence.Guard, table string) {
	t.Helper()
	ctx := t.Context()
	if err := g.Claim(ctx, fence.Token(3), "a"); err != nil {
		t.Fatal(err)
	}
	if qty, tok := row(t, db, g, table, "a"); qty != 5 || tok != 3 {
		t.Fatalf("after claim: (%d, %d), want (5, 3)", qty, tok)
	}
	if err := g.Claim(ctx, fence.Token(3), "a"); err != nil {
		t.Fatalf("the same holder claims again: %v", err)
	}
	if err := g.Claim(ctx, fence.Token(2), "a"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale claim: %v", err)
	}
	var qty int64
	var note string
	if err := g.Read(ctx, fence.Token(4), "a", sqlfence.Into{"qty": &qty, "note": &note}); err != nil || qty != 5 || note != "x" {
		t.Fatalf("read: %v (%d, %q)", err, qty, note)
	}
	qty = -1
	if err := g.Read(ctx, fence.Token(3), "a", sqlfence.Into{"qty": &qty}); !errors.Is(err, fence.ErrStale) || qty != -1 {
		t.Fatalf("stale read: %v, read %d", err, qty)
	}
	if _, tok := row(t, db, g, table, "a"); tok != 4 {
		t.Fatalf("token %d after a refused read, want 4", tok)
	}
}

// checkMissingRowsNotClaimed reads and claims a row that does not exist:
// both are ErrNotFound and create no row.
func checkMissingRowsNotClaimed(t *testing.T, db *sql.DB, g *sqlfence.Guard, table string) {
	t.Helper()
	ctx := t.Context()
	var qty int64
	if err := g.Read(ctx, fence.Token(9), "missing", sqlfence.Into{"qty": &qty}); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("read of a missing row: %v", err)
	}
	if err := g.Claim(ctx, fence.Token(9), "missing"); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("claim of a missing row: %v", err)
	}
	var n int
	if err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM %s", table)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows (%v): a claim created one", n, err)
	}
}

// TestReadBadInput: bad input is refused before any statement runs (the
// table does not exist).
func TestReadBadInput(t *testing.T) {
	db := testsvc.OpenDB(t, "sqlite", sqliteDSN(t.TempDir()+"/x.db"))
	g := guardOn(t, db, "no_such_table")
	ctx := context.Background()
	var n int64
	for name, err := range map[string]error{
		"nil holder":       g.Read(ctx, nil, "k", sqlfence.Into{"a": &n}),
		"no columns":       g.Read(ctx, fence.Token(1), "k", nil),
		"bad column":       g.Read(ctx, fence.Token(1), "k", sqlfence.Into{"a)--": &n}),
		"not a pointer":    g.Read(ctx, fence.Token(1), "k", sqlfence.Into{"a": n}),
		"nil pointer":      g.Read(ctx, fence.Token(1), "k", sqlfence.Into{"a": (*int64)(nil)}),
		"claim, token 0":   g.Claim(ctx, fence.Token(0), "k"),
		"Add(nil)":         g.Update(ctx, fence.Token(1), "k", sqlfence.Values{"a": sqlfence.Add(nil)}),
		"Add in an Upsert": g.Upsert(ctx, fence.Token(1), "k", sqlfence.Values{"a": sqlfence.Add(1)}),
	} {
		if !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
