package pgxstate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/state"
	"github.com/latchkey-go/latchkey/state/pgxstate"
)

var flow = []state.Transition{{From: "UNPAID", To: "PAID"}, {From: "UNPAID", To: "CANCELLED"}}

// orders returns a pool and an orders table with o1 and o2 UNPAID, unique to
// the test and dropped at its end.
func orders(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	pool := testsvc.OpenPgx(t, testsvc.PostgresURL(t))
	table := testsvc.TableName("pgxstate_")
	ctx := context.Background()
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id TEXT PRIMARY KEY, status TEXT NOT NULL, version BIGINT NOT NULL DEFAULT 0)`, table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE "+table); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (id, status) VALUES ('o1', 'UNPAID'), ('o2', 'UNPAID')`, table)); err != nil {
		t.Fatal(err)
	}
	return pool, table
}

// machine returns a pool, an orders table as orders makes it and a Machine
// of flow on them.
func machine(t *testing.T) (*pgxpool.Pool, string, *state.Machine) {
	t.Helper()
	pool, table := orders(t)
	m, err := pgxstate.NewMachine(pool, table, flow)
	if err != nil {
		t.Fatal(err)
	}
	return pool, table, m
}

// A move inside a pgx.Tx commits or rolls back with it: rolled back, the
// order is UNPAID again and the next move applies.
func TestMoveJoinsTheTransaction(t *testing.T) {
	t.Parallel()
	pool, _, m := machine(t)
	ctx := t.Context()
	errAbandon := errors.New("abandoned")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if r, err := m.On(pgxstate.Conn(tx)).Move(ctx, "o1", "PAID", nil); err != nil || r != state.Applied {
			return fmt.Errorf("move in the transaction: %v, %v", r, err)
		}
		return errAbandon
	})
	if !errors.Is(err, errAbandon) {
		t.Fatal(err)
	}
	if cur, err := m.Current(ctx, "o1"); err != nil || cur != "UNPAID" {
		t.Fatalf("after the rollback: %q, %v; want UNPAID", cur, err)
	}
	if r, err := m.Move(ctx, "o1", "PAID", nil); err != nil || r != state.Applied {
		t.Fatalf("move after the rollback: %v, %v", r, err)
	}
	if r, err := m.Move(ctx, "o1", "PAID", nil); err != nil || r != state.Duplicate {
		t.Fatalf("second move: %v, %v; want Duplicate", r, err)
	}
	if _, err := m.Move(ctx, "o1", "CANCELLED", nil); !errors.Is(err, state.ErrIllegal) {
		t.Fatalf("cancel after payment: %v; want ErrIllegal", err)
	}
	if _, err := m.Move(ctx, "nobody", "PAID", nil); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("move of a missing row: %v; want ErrNotFound (pgx.ErrNoRows told as none)", err)
	}
}

// Two pgx transactions move two orders in opposite orders: PostgreSQL's
// deadlock victim (SQLSTATE 40P01) gets an error wrapping state.ErrRetry,
// pgx's error inside, and its moves are rolled back.
func TestDeadlockIsRetry(t *testing.T) {
	t.Parallel()
	pool, table, m := machine(t)
	ctx := t.Context()
	run := func(first, second string, moved chan<- struct{}, proceed <-chan struct{}) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			in := m.On(pgxstate.Conn(tx))
			if _, err := in.Move(ctx, first, "PAID", nil); err != nil {
				return err
			}
			close(moved)
			<-proceed
			_, err := in.Move(ctx, second, "CANCELLED", nil)
			return err
		})
	}
	e1, e2 := suitekit.InOppositeOrders(run, "o1", "o2")
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("transactions ended %v and %v, want one through and one deadlock victim", e1, e2)
	}
	victim := errors.Join(e1, e2)
	var pe *pgconn.PgError
	if !errors.Is(victim, state.ErrRetry) || !errors.As(victim, &pe) || pe.Code != "40P01" {
		t.Fatalf("victim's error = %v, want ErrRetry wrapping SQLSTATE 40P01", victim)
	}
	var paid, cancelled int
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FILTER (WHERE status = 'PAID'), count(*) FILTER (WHERE status = 'CANCELLED') FROM %s`, table)).Scan(&paid, &cancelled); err != nil {
		t.Fatal(err)
	}
	if paid != 1 || cancelled != 1 {
		t.Fatalf("%d paid, %d cancelled; want exactly the survivor's two moves", paid, cancelled)
	}
}

// An optimistic update in a pgx.Tx, with one attempt as the doc asks, bumps
// the version with the write.
func TestOptimisticInTransaction(t *testing.T) {
	t.Parallel()
	pool, table := orders(t)
	ctx := t.Context()
	o, err := pgxstate.NewOptimistic(pool, table, state.WithAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var status string
		return o.On(pgxstate.Conn(tx)).Update(ctx, "o2", state.Into{"status": &status}, func() (state.Values, error) {
			return state.Values{"status": status + "!"}, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var status string
	var version int64
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT status, version FROM %s WHERE id = 'o2'`, table)).Scan(&status, &version); err != nil {
		t.Fatal(err)
	}
	if status != "UNPAID!" || version != 1 {
		t.Fatalf("row is %q at version %d, want UNPAID! at 1", status, version)
	}
}

// Bad input is refused with state.ErrInvalid before any statement runs.
func TestBadInput(t *testing.T) {
	t.Parallel()
	if _, err := pgxstate.NewMachine(nil, "t", flow); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("nil pool = %v, want ErrInvalid", err)
	}
	if _, err := pgxstate.NewOptimistic(nil, "t"); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("nil pool = %v, want ErrInvalid", err)
	}
	pool := testsvc.OpenPgx(t, "postgres://127.0.0.1:1/none")
	if _, err := pgxstate.NewMachine(pool, "t t", flow); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("bad table = %v, want ErrInvalid", err)
	}
	// A MySQL dialect given by mistake is overridden: pgx speaks PostgreSQL.
	if _, err := pgxstate.NewOptimistic(pool, "t", state.WithDialect(state.MySQL)); err != nil {
		t.Errorf("NewOptimistic with a stray dialect = %v", err)
	}
	if _, err := state.NewMachineOn(pgxstate.Conn(pool), "t", flow); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("NewMachineOn without a dialect = %v, want ErrInvalid", err)
	}
	if _, err := state.NewMachineOn(nil, "t", flow, state.WithDialect(state.Postgres)); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("NewMachineOn(nil) = %v, want ErrInvalid", err)
	}
}

// A move in a REPEATABLE READ pgx transaction whose row another transaction
// moved after the snapshot was taken fails with SQLSTATE 40001, which is
// state.ErrRetry.
func TestSerializationFailureIsRetry(t *testing.T) {
	t.Parallel()
	pool, _, m := machine(t)
	ctx := t.Context()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	in := m.On(pgxstate.Conn(tx))
	if cur, err := in.Current(ctx, "o1"); err != nil || cur != "UNPAID" {
		t.Fatalf("first read: %q, %v", cur, err)
	} // the snapshot is taken
	if _, err := m.Move(ctx, "o1", "CANCELLED", nil); err != nil {
		t.Fatal(err)
	}
	_, err = in.Move(ctx, "o1", "PAID", nil)
	var pe *pgconn.PgError
	if !errors.Is(err, state.ErrRetry) || !errors.As(err, &pe) || pe.Code != "40001" {
		t.Fatalf("move over a concurrent update = %v, want ErrRetry wrapping SQLSTATE 40001", err)
	}
}
