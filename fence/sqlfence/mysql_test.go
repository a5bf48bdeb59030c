package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// twoAccounts makes accounts a and b at 1000, token 0.
func twoAccounts(t *testing.T, db *sql.DB) (*sqlfence.Guard, string) {
	t.Helper()
	table := inventoryTable(t, db)
	if _, err := db.Exec(fmt.Sprintf("INSERT INTO %s (id, qty) VALUES ('a', 1000), ('b', 1000)", table)); err != nil {
		t.Fatal(err)
	}
	return guardOn(t, db, table), table
}

// TestMySQLDeadlockIsRetry: two transfers lock two accounts in opposite
// orders. InnoDB kills one; its error must say "retry the transaction"
// (ErrRetry, the driver's 1213 inside), and none of its debits may stay.
func TestMySQLDeadlockIsRetry(t *testing.T) {
	for _, level := range []string{"READ-COMMITTED", "REPEATABLE-READ"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			db := testsvc.OpenDB(t, "mysql", testsvc.MySQL(t, testsvc.MySQLIsolation(t, level)...))
			g, table := twoAccounts(t, db)
			ctx := t.Context()
			transfer := func(first, second string, locked chan<- struct{}, proceed <-chan struct{}) error {
				tok := map[string]uint64{"a": 1, "b": 2}[first] // a to b with token 1, b to a with 2
				return transferInTx(ctx, db, g, tok, first, second, locked, proceed)
			}
			e1, e2 := suitekit.InOppositeOrders(transfer, "a", "b")
			var victim error
			switch {
			case e1 == nil && e2 != nil:
				victim = e2
			case e2 == nil && e1 != nil:
				victim = e1
			default:
				t.Fatalf("transfers ended %v and %v, want one through and one deadlock victim", e1, e2)
			}
			var me *mysql.MySQLError
			if !errors.Is(victim, sqlfence.ErrRetry) || !errors.As(victim, &me) || me.Number != 1213 {
				t.Fatalf("deadlock victim's error = %v, want ErrRetry wrapping MySQL error 1213", victim)
			}
			// The survivor moved 100 one way; the victim moved nothing.
			var sum int64
			if err := db.QueryRow(fmt.Sprintf("SELECT SUM(qty) FROM %s", table)).Scan(&sum); err != nil || sum != 2000 {
				t.Fatalf("total %d (%v), want 2000", sum, err)
			}
		})
	}
}

// transferInTx moves 100 from account first to account second in one
// transaction, with token tok; it closes locked once it holds first's row
// and takes second's once proceed is closed.
func transferInTx(ctx context.Context, db *sql.DB, g *sqlfence.Guard, tok uint64, first, second string, locked chan<- struct{}, proceed <-chan struct{}) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	in := g.In(tx)
	if err := in.Update(ctx, fence.Token(tok), first, sqlfence.Values{"qty": sqlfence.Add(-100)}); err != nil {
		return err
	}
	close(locked)
	<-proceed
	if err := in.Update(ctx, fence.Token(tok), second, sqlfence.Values{"qty": sqlfence.Add(100)}); err != nil {
		return err
	}
	return tx.Commit()
}

// TestMySQLLockWaitTimeoutIsRetry: a holder whose claim waits longer than
// innodb_lock_wait_timeout behind another transaction gets ErrRetry, and
// its write is not applied.
func TestMySQLLockWaitTimeoutIsRetry(t *testing.T) {
	dsn := testsvc.MySQL(t)
	db := testsvc.OpenDB(t, "mysql", dsn)
	g, table := twoAccounts(t, db)
	ctx := t.Context()
	first, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback()
	if err := g.In(first).Claim(ctx, fence.Token(2), "a"); err != nil {
		t.Fatal(err)
	}
	impatientDSN, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	impatientDSN.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	impatient := guardOn(t, testsvc.OpenDB(t, "mysql", impatientDSN.FormatDSN()), table)
	err = impatient.Update(ctx, fence.Token(3), "a", sqlfence.Values{"qty": 1})
	if !errors.Is(err, sqlfence.ErrRetry) {
		t.Fatalf("write behind a held row lock = %v, want ErrRetry", err)
	}
	if err := first.Rollback(); err != nil {
		t.Fatal(err)
	}
	if qty, token := row(t, db, g, table, "a"); qty != 1000 || token != 0 {
		t.Fatalf("row (%d, %d) after the timeout, want (1000, 0)", qty, token)
	}
}

// TestMySQLKilledTransactionRollsBack: the connection of a transaction that
// made a fenced debit is killed on the server before it commits. The commit
// fails and the debit, and the claim's token, are gone; a later holder with
// a lower token than the killed one's still gets in.
func TestMySQLKilledTransactionRollsBack(t *testing.T) {
	dsn := testsvc.MySQL(t)
	admin := testsvc.OpenDB(t, "mysql", dsn)
	db := testsvc.OpenDB(t, "mysql", dsn)
	g, table := twoAccounts(t, db)
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var balance int64
	if err := g.In(tx).Read(ctx, fence.Token(9), "a", sqlfence.Into{"qty": &balance}); err != nil {
		t.Fatal(err)
	}
	if err := g.In(tx).Update(ctx, fence.Token(9), "a", sqlfence.Values{"qty": balance - 300}); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("a transaction whose connection was killed committed")
	}
	if qty, token := row(t, admin, g, table, "a"); qty != 1000 || token != 0 {
		t.Fatalf("row (%d, %d) after the kill, want (1000, 0): the killed debit stayed", qty, token)
	}
	if err := g.Update(context.Background(), fence.Token(5), "a", sqlfence.Values{"qty": 900}); err != nil {
		t.Fatalf("write after the killed transaction: %v", err)
	}
}

// TestMySQLClaimWithItsOwnToken: a second claim or write with the token the
// row already carries, changing nothing, succeeds on MySQL whatever the
// client's clientFoundRows setting, as it does elsewhere.
func TestMySQLClaimWithItsOwnToken(t *testing.T) {
	for _, found := range []string{"false", "true"} {
		t.Run("clientFoundRows="+found, func(t *testing.T) {
			t.Parallel()
			db := testsvc.OpenDB(t, "mysql", testsvc.MySQL(t, "clientFoundRows", found))
			g, _ := twoAccounts(t, db)
			ctx := t.Context()
			for range 2 {
				if err := g.Claim(ctx, fence.Token(4), "a"); err != nil {
					t.Fatalf("claim with the row's own token: %v", err)
				}
				if err := g.Update(ctx, fence.Token(4), "a", sqlfence.Values{"qty": 1000}); err != nil {
					t.Fatalf("write of the value the row holds: %v", err)
				}
				if err := g.Upsert(ctx, fence.Token(4), "a", sqlfence.Values{"qty": 1000}); err != nil {
					t.Fatalf("upsert of the row as it is: %v", err)
				}
			}
			if err := g.Claim(ctx, fence.Token(3), "a"); !errors.Is(err, fence.ErrStale) {
				t.Fatalf("claim with a lower token = %v, want ErrStale", err)
			}
		})
	}
}

// TestMySQLUpsertOnAnotherUniqueKey: ON DUPLICATE KEY fires on any unique
// index. An upsert whose new row collides with another row on a second
// unique key must change neither row and say so.
func TestMySQLUpsertOnAnotherUniqueKey(t *testing.T) {
	db := testsvc.OpenDB(t, "mysql", testsvc.MySQL(t))
	if _, err := db.Exec(`CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, order_no VARCHAR(64) NOT NULL, qty BIGINT,
		fence_token BIGINT NOT NULL DEFAULT 0, UNIQUE KEY uk_order_no (order_no))`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO orders (id, order_no, qty) VALUES ('o1', 'N-1', 5)`); err != nil {
		t.Fatal(err)
	}
	g := guardOn(t, db, "orders")
	err := g.Upsert(t.Context(), fence.Token(7), "o2", sqlfence.Values{"order_no": "N-1", "qty": 99})
	if !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("upsert colliding on uk_order_no = %v, want ErrInvalid", err)
	}
	var qty, tok, n int64
	if err := db.QueryRow(`SELECT qty, fence_token, (SELECT COUNT(*) FROM orders) FROM orders WHERE id = 'o1'`).Scan(&qty, &tok, &n); err != nil {
		t.Fatal(err)
	}
	if qty != 5 || tok != 0 || n != 1 {
		t.Fatalf("after the refused upsert: o1 (%d, token %d), %d rows; want (5, 0), 1", qty, tok, n)
	}
}
