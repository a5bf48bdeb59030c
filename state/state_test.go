package state_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/state"
	"github.com/latchkey-go/latchkey/state/pgxstate"
)

var databases = []struct {
	name, driver string
	dsn          func(t *testing.T) string
}{
	{"sqlite", "sqlite", func(t *testing.T) string {
		return "file:" + filepath.Join(t.TempDir(), "state.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	}},
	{"postgres", "pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) }},
	// PostgreSQL through a pgx pool (state/pgxstate); the tests' own
	// statements still go through database/sql.
	{pgxName, "pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) }},
	// MariaDB under both isolation levels a MySQL user runs.
	{"mysql-read-committed", "mysql", func(t *testing.T) string {
		return testsvc.MySQL(t, testsvc.MySQLIsolation(t, "READ-COMMITTED")...)
	}},
	{"mysql-repeatable-read", "mysql", func(t *testing.T) string {
		return testsvc.MySQL(t, testsvc.MySQLIsolation(t, "REPEATABLE-READ")...)
	}},
}

// keyType is the type of a text primary key: MySQL indexes no TEXT column
// whole.
func keyType(driver string) string {
	if driver == "mysql" {
		return "VARCHAR(64)"
	}
	return "TEXT"
}

// pgxName is the databases entry on which Machine and Optimistic run on pgx.
const pgxName = "pgx"

// pools holds the pgx pool of each *sql.DB of the pgx entry, for
// newMachine and newOptimistic.
var pools sync.Map // *sql.DB -> *pgxpool.Pool

// newMachine is state.NewMachine, or pgxstate.NewMachine on db's pool in
// the pgx entry; it fails t on an error.
func newMachine(t *testing.T, db *sql.DB, table string, flow []state.Transition, opts ...state.Option) *state.Machine {
	t.Helper()
	var m *state.Machine
	var err error
	if p, ok := pools.Load(db); ok {
		m, err = pgxstate.NewMachine(p.(*pgxpool.Pool), table, flow, opts...)
	} else {
		m, err = state.NewMachine(db, table, flow, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newOptimistic is state.NewOptimistic, or pgxstate.NewOptimistic on db's
// pool in the pgx entry; it fails t on an error.
func newOptimistic(t *testing.T, db *sql.DB, table string, opts ...state.Option) *state.Optimistic {
	t.Helper()
	var o *state.Optimistic
	var err error
	if p, ok := pools.Load(db); ok {
		o, err = pgxstate.NewOptimistic(p.(*pgxpool.Pool), table, opts...)
	} else {
		o, err = state.NewOptimistic(db, table, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// forEachDB runs f on each database with a fresh orders table, unique to the
// test and dropped at cleanup.
func forEachDB(t *testing.T, f func(t *testing.T, db *sql.DB, table string)) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			db := testsvc.OpenDB(t, d.driver, d.dsn(t))
			if d.name == pgxName {
				pool, err := pgxpool.New(context.Background(), d.dsn(t))
				if err != nil {
					t.Fatal(err)
				}
				pools.Store(db, pool)
				t.Cleanup(func() { pools.Delete(db); pool.Close() })
			}
			table := testsvc.TableName("state_orders_")
			if _, err := db.Exec(fmt.Sprintf(`CREATE TABLE %s (id %s PRIMARY KEY, status VARCHAR(32) NOT NULL,
				amount BIGINT NOT NULL DEFAULT 0, paid_by TEXT, version BIGINT NOT NULL DEFAULT 0)`, table, keyType(d.driver))); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if _, err := db.Exec("DROP TABLE " + table); err != nil {
					t.Errorf("drop %s: %v", table, err)
				}
			})
			f(t, db, table)
		})
	}
}

func insert(t *testing.T, db *sql.DB, table, id, status string, amount int64) {
	t.Helper()
	if _, err := db.Exec(fmt.Sprintf("INSERT INTO %s (id, status, amount) VALUES ('%s', '%s', %d)", table, id, status, amount)); err != nil {
		t.Fatal(err)
	}
}

var orderFlow = []state.Transition{
	{From: "UNPAID", To: "PAID"},
	{From: "PAYMENT_FAILED", To: "PAID"},
	{From: "UNPAID", To: "PAYMENT_FAILED"},
	{From: "UNPAID", To: "CANCELLED"},
	{From: "PAID", To: "REFUNDED"},
}

func TestMove(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		ctx := t.Context()
		m := newMachine(t, db, table, orderFlow)
		insert(t, db, table, "o1", "UNPAID", 100)
		checkPaidOnce(t, m, db, table)
		checkIllegalMovesRefused(t, m)
		if r, err := m.Move(ctx, "o1", "REFUNDED", nil); r != state.Applied || err != nil {
			t.Fatalf("PAID -> REFUNDED: %v, %v", r, err)
		}
		if _, err := m.Move(ctx, "nope", "PAID", nil); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("missing row: %v", err)
		}
		insert(t, db, table, "o2", "PAYMENT_FAILED", 5)
		if r, err := m.Move(ctx, "o2", "PAID", nil); r != state.Applied || err != nil {
			t.Fatalf("second declared source: %v, %v", r, err)
		}
		if !m.Allowed("UNPAID", "PAID") || m.Allowed("PAID", "UNPAID") {
			t.Fatal("Allowed")
		}
	})
}

// checkPaidOnce moves the unpaid order o1 to PAID twice: the first move
// is applied with its values, the second is a duplicate and writes none.
func checkPaidOnce(t *testing.T, m *state.Machine, db *sql.DB, table string) {
	t.Helper()
	ctx := t.Context()
	if r, err := m.Move(ctx, "o1", "PAID", state.Values{"paid_by": "card"}); r != state.Applied || err != nil {
		t.Fatalf("first move: %v, %v", r, err)
	}
	if r, err := m.Move(ctx, "o1", "PAID", state.Values{"paid_by": "twice"}); r != state.Duplicate || err != nil {
		t.Fatalf("repeated move: %v, %v", r, err)
	}
	var paidBy string
	if err := db.QueryRow(fmt.Sprintf("SELECT paid_by FROM %s WHERE id = 'o1'", table)).Scan(&paidBy); err != nil || paidBy != "card" {
		t.Fatalf("values of the duplicate applied: %q %v", paidBy, err)
	}
}

// checkIllegalMovesRefused moves the paid order o1 where the flow has no
// way from PAID: each is ErrIllegal and leaves it PAID.
func checkIllegalMovesRefused(t *testing.T, m *state.Machine) {
	t.Helper()
	ctx := t.Context()
	if _, err := m.Move(ctx, "o1", "CANCELLED", nil); !errors.Is(err, state.ErrIllegal) {
		t.Fatalf("PAID -> CANCELLED: %v", err)
	}
	if _, err := m.Move(ctx, "o1", "UNPAID", nil); !errors.Is(err, state.ErrIllegal) {
		t.Fatalf("move to a state with no declared way in: %v", err)
	}
	if cur, _ := m.Current(ctx, "o1"); cur != "PAID" {
		t.Fatalf("status %q after illegal moves", cur)
	}
}

// TestMoveRace: many callers move one order to PAID at once (a callback
// delivered many times): exactly one is told Applied, the rest Duplicate.
func TestMoveRace(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		m := newMachine(t, db, table, orderFlow)
		insert(t, db, table, "o", "UNPAID", 100)
		var applied, dup atomic.Int32
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				switch r, err := m.Move(t.Context(), "o", "PAID", nil); {
				case err != nil:
					t.Error(err)
				case r == state.Applied:
					applied.Add(1)
				case r == state.Duplicate:
					dup.Add(1)
				}
			})
		}
		wg.Wait()
		if applied.Load() != 1 || dup.Load() != 19 {
			t.Fatalf("applied %d, duplicate %d; want 1 and 19", applied.Load(), dup.Load())
		}
	})
}

// TestOptimisticNoLostUpdates: concurrent read-modify-write increments lose
// nothing, and each reported success is in the total.
func TestOptimisticNoLostUpdates(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		o := newOptimistic(t, db, table, state.WithAttempts(1000), state.WithBackoff(0, 0))
		insert(t, db, table, "acct", "OPEN", 0)
		const workers, each = 6, 15
		var calls atomic.Int32
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					var amount int64
					err := o.Update(t.Context(), "acct", state.Into{"amount": &amount}, func() (state.Values, error) {
						calls.Add(1)
						return state.Values{"amount": amount + 1}, nil
					})
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		var amount, version int64
		if err := db.QueryRow(fmt.Sprintf("SELECT amount, version FROM %s WHERE id = 'acct'", table)).Scan(&amount, &version); err != nil {
			t.Fatal(err)
		}
		if amount != workers*each || version != workers*each {
			t.Fatalf("amount %d, version %d; want %d (lost updates)", amount, version, workers*each)
		}
		t.Logf("%d increments took %d runs of fn", workers*each, calls.Load())
	})
}

// TestOptimisticRerunsOnFreshRead: another writer changes the row while fn
// runs; the write is refused, fn runs again and sees the other's value.
// The other writer sets amount back to what fn read (ABA): the version still
// catches it.
func TestOptimisticRerunsOnFreshRead(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		o := newOptimistic(t, db, table)
		insert(t, db, table, "a", "OPEN", 10)
		var amount int64
		var seen []int64
		err := o.Update(t.Context(), "a", state.Into{"amount": &amount}, func() (state.Values, error) {
			seen = append(seen, amount)
			switch len(seen) {
			case 1: // someone else: 10 -> 50
				if _, err := db.Exec(fmt.Sprintf("UPDATE %s SET amount = 50, version = version + 1 WHERE id = 'a'", table)); err != nil {
					return nil, err
				}
			case 2: // ABA: 50 -> 10 -> 50 -> back to 50, same value, new version
				if _, err := db.Exec(fmt.Sprintf("UPDATE %s SET amount = 50, version = version + 2 WHERE id = 'a'", table)); err != nil {
					return nil, err
				}
			}
			return state.Values{"amount": amount + 1}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(seen) != "[10 50 50]" {
			t.Fatalf("fn saw %v, want [10 50 50]", seen)
		}
		var got int64
		if err := db.QueryRow(fmt.Sprintf("SELECT amount FROM %s WHERE id = 'a'", table)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != 51 {
			t.Fatalf("amount %d, want 51", got)
		}
	})
}

// TestOptimisticBounded: when every attempt loses, Update gives up after
// exactly the configured attempts with ErrConflict and writes nothing.
func TestOptimisticBounded(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		o := newOptimistic(t, db, table, state.WithAttempts(3))
		insert(t, db, table, "b", "OPEN", 1)
		runs := 0
		err := o.Update(t.Context(), "b", nil, func() (state.Values, error) {
			runs++
			_, err := db.Exec(fmt.Sprintf("UPDATE %s SET version = version + 1 WHERE id = 'b'", table))
			return state.Values{"amount": 999}, err
		})
		if !errors.Is(err, state.ErrConflict) || runs != 3 {
			t.Fatalf("err %v after %d runs; want ErrConflict after 3", err, runs)
		}
		var amount int64
		if err := db.QueryRow(fmt.Sprintf("SELECT amount FROM %s WHERE id = 'b'", table)).Scan(&amount); err != nil {
			t.Fatal(err)
		}
		if amount != 1 {
			t.Fatalf("amount %d written by a conflicting update", amount)
		}

		boom := errors.New("boom")
		if err := o.Update(t.Context(), "b", nil, func() (state.Values, error) { return state.Values{"amount": 7}, boom }); !errors.Is(err, boom) {
			t.Fatalf("fn's error: %v", err)
		}
		if err := o.Update(t.Context(), "missing", nil, func() (state.Values, error) { return nil, nil }); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("missing row: %v", err)
		}
		if err := o.Update(t.Context(), "b", nil, func() (state.Values, error) { return state.Values{"version": 0}, nil }); !errors.Is(err, state.ErrInvalid) {
			t.Fatalf("setting the version: %v", err)
		}
	})
}

func TestBadInput(t *testing.T) {
	db := testsvc.OpenDB(t, "sqlite", filepath.Join(t.TempDir(), "x.db"))
	for name, err := range map[string]error{
		"nil db":          func() error { _, err := state.NewMachine(nil, "t", orderFlow); return err }(),
		"no transitions":  func() error { _, err := state.NewMachine(db, "t", nil); return err }(),
		"self transition": func() error { _, err := state.NewMachine(db, "t", []state.Transition{{"A", "A"}}); return err }(),
		"empty state":     func() error { _, err := state.NewMachine(db, "t", []state.Transition{{"", "A"}}); return err }(),
		"bad status col":  func() error { _, err := state.NewMachine(db, "t", orderFlow, state.WithStatusColumn("s;")); return err }(),
		"bad table":       func() error { _, err := state.NewOptimistic(db, "t t"); return err }(),
		"bad key":         func() error { _, err := state.NewOptimistic(db, "t", state.WithKeyColumn("")); return err }(),
		"zero attempts":   func() error { _, err := state.NewOptimistic(db, "t", state.WithAttempts(0)); return err }(),
		"negative wait":   func() error { _, err := state.NewOptimistic(db, "t", state.WithBackoff(-1, 0)); return err }(),
	} {
		if !errors.Is(err, state.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// An Optimistic with its own version column bumps that column and no other,
// and In runs its update inside the caller's transaction: nothing is seen
// before the commit, and a rollback leaves the row as it was.
func TestOptimisticVersionColumnAndTransaction(t *testing.T) {
	forEachDB(t, func(t *testing.T, db *sql.DB, table string) {
		if _, err := db.Exec(fmt.Sprintf("ALTER TABLE %s ADD COLUMN rev BIGINT NOT NULL DEFAULT 0", table)); err != nil {
			t.Fatal(err)
		}
		o, err := state.NewOptimistic(db, table, state.WithVersionColumn("rev"), state.WithAttempts(1))
		if err != nil {
			t.Fatal(err)
		}
		insert(t, db, table, "a", "OPEN", 10)
		add := func(tx *sql.Tx, n int64) error {
			var amount int64
			return o.In(tx).Update(t.Context(), "a", state.Into{"amount": &amount}, func() (state.Values, error) {
				return state.Values{"amount": amount + n}, nil
			})
		}
		row := func() (amount, version, rev int64) {
			t.Helper()
			q := fmt.Sprintf("SELECT amount, version, rev FROM %s WHERE id = 'a'", table)
			if err := db.QueryRow(q).Scan(&amount, &version, &rev); err != nil {
				t.Fatal(err)
			}
			return amount, version, rev
		}
		for _, commit := range []bool{false, true} {
			tx, err := db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := add(tx, 5); err != nil {
				t.Fatal(err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if amount, version, rev := row(); amount != 15 || version != 0 || rev != 1 {
			t.Fatalf("amount %d, version %d, rev %d; want 15, 0, 1 (one committed update, counted in rev)", amount, version, rev)
		}
	})
}
