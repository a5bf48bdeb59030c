package sqlinbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
)

// pgxEnv is env's table and ledger on PostgreSQL, with the inbox on a pgx
// pool; the tests' own statements still go through e.db.
type pgxEnv struct {
	*env
	pool *pgxpool.Pool
	in   *sqlinbox.PgxInbox
}

func newPgxEnv(t *testing.T, opts ...sqlinbox.Option) *pgxEnv {
	t.Helper()
	e := newEnv(t, backends[0]) // postgres
	pool, err := pgxpool.New(context.Background(), backends[0].dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	in, err := sqlinbox.NewPgx(pool, append([]sqlinbox.Option{sqlinbox.WithTable(e.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &pgxEnv{env: e, pool: pool, in: in}
}

// pay is the business write in the caller's pgx transaction.
func (e *pgxEnv) pay(ctx context.Context, tx pgx.Tx, m dedup.Message) error {
	_, err := tx.Exec(ctx, "INSERT INTO "+e.ledger+" (msg, amount) VALUES ($1, 100)", m.ID)
	return err
}

func TestPgxConformance(t *testing.T) {
	t.Parallel()
	e := newPgxEnv(t)
	deduptest.RunHandler(t, func(t *testing.T, next dedup.Handler) dedup.Handler {
		return e.in.Wrap(func(ctx context.Context, _ pgx.Tx, m dedup.Message) error { return next(ctx, m) })
	})
}

func TestPgxBadIDs(t *testing.T) {
	t.Parallel()
	deduptest.CheckBadIDsRefused(t, newPgxEnv(t).in)
}

// pgxProcess is in.Process as a processor.
func pgxProcess(in *sqlinbox.PgxInbox) processor[pgx.Tx] {
	return func(ctx context.Context, m dedup.Message, h txHandler[pgx.Tx]) (dedup.Outcome, error) {
		return in.Process(ctx, m, h)
	}
}

// The effect and the id commit together in the pgx transaction, or roll back
// together; a duplicate adds neither; a hung handler's transaction is rolled
// back at the timeout.
func TestPgxCommitAndRollBackTogether(t *testing.T) {
	t.Parallel()
	e := newPgxEnv(t)
	ctx := t.Context()
	m := dedup.Message{ID: "pay-1"}
	rollsBack(ctx, t, e.env, pgxProcess(e.in), e.pay, m, failWithBoom, errBoom)
	payOnce(ctx, t, e.env, pgxProcess(e.in), e.pay, m)
	if mk, err := e.in.Lookup(ctx, m.ID); err != nil || mk.State != dedup.Done {
		t.Fatalf("Lookup = %+v, %v", mk, err)
	}

	short, err := sqlinbox.NewPgx(e.pool, sqlinbox.WithTable(e.table), sqlinbox.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hung := dedup.Message{ID: "pay-2"}
	rollsBack(ctx, t, e.env, pgxProcess(short), e.pay, hung, hang, context.DeadlineExceeded)
	payOnce(ctx, t, e.env, pgxProcess(e.in), e.pay, hung)
}

// Claim joins the caller's pgx.Tx: a rollback forgets the id, a commit keeps
// it.
func TestPgxClaimInOwnTransaction(t *testing.T) {
	t.Parallel()
	e := newPgxEnv(t)
	ctx := t.Context()
	for _, commit := range []bool{false, true} {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := e.in.Claim(ctx, tx, "own-tx")
		if err != nil || !fresh {
			t.Fatalf("Claim (commit=%v): %v, %v; want fresh", commit, fresh, err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if fresh, err := e.in.Claim(ctx, tx, "own-tx"); err != nil || fresh {
			return fmt.Errorf("Claim after a commit: %v, %v; want duplicate", fresh, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, i := e.rows(t, "own-tx"); i != 1 {
		t.Fatalf("%d inbox rows, want the committed one", i)
	}
}

// Two transactions claim two ids in opposite orders: PostgreSQL's deadlock
// victim (SQLSTATE 40P01) gets an error wrapping ErrRetry, pgx's error
// inside.
func TestPgxDeadlockIsRetry(t *testing.T) {
	t.Parallel()
	e := newPgxEnv(t)
	ctx := t.Context()
	run := func(first, second string, claimed chan<- struct{}, proceed <-chan struct{}) error {
		return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			if _, err := e.in.Claim(ctx, tx, first); err != nil {
				return err
			}
			close(claimed)
			<-proceed
			_, err := e.in.Claim(ctx, tx, second)
			return err
		})
	}
	c1, c2, both := make(chan struct{}), make(chan struct{}), make(chan struct{})
	errs := make(chan error, 2)
	go func() { errs <- run("a", "b", c1, both) }()
	go func() { errs <- run("b", "a", c2, both) }()
	<-c1
	<-c2
	close(both)
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("transactions ended %v and %v, want one through and one deadlock victim", e1, e2)
	}
	victim := errors.Join(e1, e2)
	var pe *pgconn.PgError
	if !errors.Is(victim, sqlinbox.ErrRetry) || !errors.As(victim, &pe) || pe.Code != "40P01" {
		t.Fatalf("victim's error = %v, want ErrRetry wrapping SQLSTATE 40P01", victim)
	}
}

// TestLedgerExactlyOnce on pgx: 100 payments delivered up to three times to
// six consumers, 30% of handler runs failing after the write.
func TestPgxLedgerExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newPgxEnv(t)
	ledgerExactlyOnce(t, e.env, e.in.Wrap(failAfterWrite(e.pay)))
}

func TestNewPgxRejectsBadArguments(t *testing.T) {
	t.Parallel()
	if _, err := sqlinbox.NewPgx(nil); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("nil pool = %v, want ErrInvalid", err)
	}
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := sqlinbox.NewPgx(pool, sqlinbox.WithTable("a-b")); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("bad table = %v, want ErrInvalid", err)
	}
	if _, err := sqlinbox.NewPgx(pool, sqlinbox.WithTimeout(0)); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("zero timeout = %v, want ErrInvalid", err)
	}
	if _, err := sqlinbox.NewPgx(pool, sqlinbox.WithTxOptions(&sql.TxOptions{Isolation: sql.LevelLinearizable})); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("an isolation level PostgreSQL lacks = %v, want ErrInvalid", err)
	}
	in, err := sqlinbox.NewPgx(pool, sqlinbox.WithTxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable}))
	if err != nil {
		t.Fatal(err)
	}
	if o, err := in.Process(t.Context(), dedup.Message{ID: "x"}, nil); o != dedup.OutcomeRejected || !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("nil handler = %v, %v; want Rejected, ErrInvalid", o, err)
	}
}

// WithTxOptions reaches the pgx transaction Process begins.
func TestPgxTxOptions(t *testing.T) {
	t.Parallel()
	e := newPgxEnv(t)
	in, err := sqlinbox.NewPgx(e.pool, sqlinbox.WithTable(e.table), sqlinbox.WithTxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable}))
	if err != nil {
		t.Fatal(err)
	}
	var level string
	if o, err := in.Process(t.Context(), dedup.Message{ID: "iso"}, func(ctx context.Context, tx pgx.Tx, _ dedup.Message) error {
		return tx.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level)
	}); o != dedup.OutcomeProcessed || err != nil {
		t.Fatal(o, err)
	}
	if level != "serializable" {
		t.Fatalf("the handler's transaction is %q, want serializable", level)
	}
}
