package state_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/state"
)

func ordersOn(t *testing.T, dsn string) (*sql.DB, *state.Machine) {
	t.Helper()
	db := testsvc.OpenDB(t, "mysql", dsn)
	if _, err := db.Exec(`CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, status VARCHAR(32) NOT NULL, paid_by TEXT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO orders (id, status) VALUES ('o1', 'UNPAID'), ('o2', 'UNPAID')`); err != nil {
		t.Fatal(err)
	}
	m := newMachine(t, db, "orders", orderFlow)
	return db, m
}

// TestMySQLCallbackTwiceInARepeatableReadTransaction: a payment callback
// arrives twice. The second copy's transaction read the order before the
// first copy's move committed; its own move then finds the order PAID. It
// must be told Duplicate, from the latest row, not ErrIllegal from its
// snapshot, which still says UNPAID.
func TestMySQLCallbackTwiceInARepeatableReadTransaction(t *testing.T) {
	db, m := ordersOn(t, testsvc.MySQL(t, testsvc.MySQLIsolation(t, "REPEATABLE-READ")...))
	ctx := t.Context()
	second, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Rollback()
	if cur, err := m.In(second).Current(ctx, "o1"); err != nil || cur != "UNPAID" {
		t.Fatalf("second copy's first read: %q, %v", cur, err)
	} // its snapshot is taken
	if r, err := m.Move(ctx, "o1", "PAID", state.Values{"paid_by": "first"}); err != nil || r != state.Applied {
		t.Fatalf("first copy: %v, %v", r, err)
	}
	r, err := m.In(second).Move(ctx, "o1", "PAID", state.Values{"paid_by": "second"})
	if err != nil || r != state.Duplicate {
		t.Fatalf("second copy's move = %v, %v; want Duplicate", r, err)
	}
	if err := second.Commit(); err != nil {
		t.Fatal(err)
	}
	var by string
	if err := db.QueryRow(`SELECT paid_by FROM orders WHERE id = 'o1'`).Scan(&by); err != nil || by != "first" {
		t.Fatalf("paid_by = %q (%v), want the first copy's", by, err)
	}
}

// TestMySQLDeadlockIsRetry: two transactions move two orders in opposite
// orders; the deadlock victim's error is ErrRetry with the driver's 1213
// inside, and its moves are rolled back.
func TestMySQLDeadlockIsRetry(t *testing.T) {
	db, m := ordersOn(t, testsvc.MySQL(t))
	ctx := t.Context()
	run := func(first, second string, locked chan<- struct{}, proceed <-chan struct{}) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := m.In(tx).Move(ctx, first, "PAID", nil); err != nil {
			return err
		}
		close(locked)
		<-proceed
		if _, err := m.In(tx).Move(ctx, second, "CANCELLED", nil); err != nil {
			return err
		}
		return tx.Commit()
	}
	e1, e2 := suitekit.InOppositeOrders(run, "o1", "o2")
	victim := e1
	if e1 == nil {
		victim = e2
	}
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("transactions ended %v and %v, want one through and one deadlock victim", e1, e2)
	}
	var me *mysql.MySQLError
	if !errors.Is(victim, state.ErrRetry) || !errors.As(victim, &me) || me.Number != 1213 {
		t.Fatalf("victim's error = %v, want ErrRetry wrapping MySQL error 1213", victim)
	}
	var paid, cancelled int
	if err := db.QueryRow(`SELECT SUM(status = 'PAID'), SUM(status = 'CANCELLED') FROM orders`).Scan(&paid, &cancelled); err != nil {
		t.Fatal(err)
	}
	if paid != 1 || cancelled != 1 {
		t.Fatalf("%d paid, %d cancelled; want exactly the survivor's two moves", paid, cancelled)
	}
}

// TestMySQLLockWaitTimeoutIsRetry: a move that waits behind another
// transaction's row lock longer than innodb_lock_wait_timeout is ErrRetry.
func TestMySQLLockWaitTimeoutIsRetry(t *testing.T) {
	dsn := testsvc.MySQL(t)
	db, m := ordersOn(t, dsn)
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := m.In(tx).Move(ctx, "o1", "PAID", nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	im := newMachine(t, testsvc.OpenDB(t, "mysql", cfg.FormatDSN()), "orders", orderFlow)
	if _, err := im.Move(ctx, "o1", "CANCELLED", nil); !errors.Is(err, state.ErrRetry) {
		t.Fatalf("move behind a held row lock = %v, want ErrRetry", err)
	}
	_ = tx.Rollback()
	if cur, err := m.Current(ctx, "o1"); err != nil || cur != "UNPAID" {
		t.Fatal(fmt.Sprint(cur, err))
	}
}
