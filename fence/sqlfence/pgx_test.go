package sqlfence_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// postgresDB is the databases entry for PostgreSQL.
var postgresDB = databases[1]

// pgxHolders is holders with each holder on its own pgx pool, as two
// processes would have, and a database/sql handle for the test's own reads.
func pgxHolders(t *testing.T) (stale, fresh *pgxpool.Pool, check func() int64, table string) {
	t.Helper()
	staleDB, _, table := holders(t, postgresDB)
	dsn := postgresDB.dsn(t)
	return testsvc.OpenPgx(t, dsn), testsvc.OpenPgx(t, dsn), func() int64 { return balance(t, staleDB, table) }, table
}

func pgxGuard(t *testing.T, pool *pgxpool.Pool, table string) *sqlfence.Guard {
	t.Helper()
	g, err := sqlfence.NewPgx(pool, table)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestPgxReadClaimsBeforeTheStaleWrite is TestReadClaimsBeforeTheStaleWrite
// inside a pgx.Tx: the fresh holder's claim and read lock the row in its
// transaction, the stale holder's write waits for the commit and is refused,
// and the balance shows exactly the acknowledged debit.
func TestPgxReadClaimsBeforeTheStaleWrite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	stalePool, freshPool, balanceNow, table := pgxHolders(t)
	stale, fresh := pgxGuard(t, stalePool, table), pgxGuard(t, freshPool, table)

	var staleRead int64
	if err := stale.Read(ctx, fence.Token(1), "acct", sqlfence.Into{"qty": &staleRead}); err != nil {
		t.Fatalf("stale holder's read: %v", err)
	} // then paused

	tx, err := freshPool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	acct := fresh.InPgx(tx)
	var freshRead int64
	if err := acct.Read(ctx, fence.Token(2), "acct", sqlfence.Into{"qty": &freshRead}); err != nil || freshRead != 1000 {
		t.Fatalf("fresh holder's read: %d, %v", freshRead, err)
	}
	staleErr := make(chan error, 1)
	go func() {
		staleErr <- stale.Update(ctx, fence.Token(1), "acct", sqlfence.Values{"qty": staleRead - 100})
	}()
	waitBlocked(t, postgresDB, nil, table)
	if err := acct.Update(ctx, fence.Token(2), "acct", sqlfence.Values{"qty": freshRead - 300}); err != nil {
		t.Fatalf("fresh holder's write: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-staleErr; !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale holder's write during the transaction: %v, want fence.ErrStale", err)
	}
	if got := balanceNow(); got != 700 {
		t.Fatalf("balance %d, want 1000 - 300 = 700 (the stale debit was refused)", got)
	}
}

// TestPgxRollbackUndoesTheClaim: a claim made in a pgx.Tx that rolls back
// leaves the row's token where it was, so a holder with a lower token than
// the rolled-back one still writes.
func TestPgxRollbackUndoesTheClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _, balanceNow, table := pgxHolders(t)
	g := pgxGuard(t, pool, table)
	errAbandon := errors.New("abandoned")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := g.InPgx(tx).Claim(ctx, fence.Token(5), "acct"); err != nil {
			return err
		}
		return errAbandon
	})
	if !errors.Is(err, errAbandon) {
		t.Fatal(err)
	}
	if tok, err := g.Token(ctx, "acct"); err != nil || tok != 0 {
		t.Fatalf("token after the rollback = %d, %v; want 0", tok, err)
	}
	if err := g.Update(ctx, fence.Token(3), "acct", sqlfence.Values{"qty": int64(900)}); err != nil {
		t.Fatalf("write with token 3 after the rolled-back claim of 5: %v", err)
	}
	if got := balanceNow(); got != 900 {
		t.Fatalf("balance %d, want 900", got)
	}
}

// TestPgxGuardOutcomes: the guarded statements on pgx answer as on
// database/sql: ErrNotFound for a missing row, ErrStale for a lower token,
// Upsert creating and guarding, Add relative.
func TestPgxGuardOutcomes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _, balanceNow, table := pgxHolders(t)
	g := pgxGuard(t, pool, table)
	if err := g.Update(ctx, fence.Token(1), "nobody", sqlfence.Values{"qty": int64(1)}); !errors.Is(err, fence.ErrNotFound) {
		t.Errorf("Update of a missing row = %v, want ErrNotFound", err)
	}
	var qty int64
	if err := g.Read(ctx, fence.Token(1), "nobody", sqlfence.Into{"qty": &qty}); !errors.Is(err, fence.ErrNotFound) {
		t.Errorf("Read of a missing row = %v, want ErrNotFound", err)
	}
	if err := g.Update(ctx, fence.Token(4), "acct", sqlfence.Values{"qty": sqlfence.Add(-100)}); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(ctx, fence.Token(3), "acct", sqlfence.Values{"qty": int64(0)}); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Update with a lower token = %v, want ErrStale", err)
	}
	if err := g.Claim(ctx, fence.Token(4), "acct"); err != nil {
		t.Errorf("Claim with the row's own token = %v", err)
	}
	if got := balanceNow(); got != 900 {
		t.Errorf("balance %d, want 900", got)
	}
	if err := g.Upsert(ctx, fence.Token(7), "new", sqlfence.Values{"qty": int64(5), "note": "n"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Upsert(ctx, fence.Token(6), "new", sqlfence.Values{"qty": int64(6), "note": "n"}); !errors.Is(err, fence.ErrStale) {
		t.Errorf("Upsert with a lower token = %v, want ErrStale", err)
	}
	if tok, err := g.Token(ctx, "new"); err != nil || tok != 7 {
		t.Errorf("Token = %d, %v; want 7", tok, err)
	}
}

// TestPgxDeadlockIsRetry: two pgx transactions claim two rows in opposite
// orders; PostgreSQL's deadlock victim (SQLSTATE 40P01) gets an error
// wrapping ErrRetry, pgx's error inside, and its claims are undone.
func TestPgxDeadlockIsRetry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _, _, table := pgxHolders(t)
	g := pgxGuard(t, pool, table)
	if _, err := pool.Exec(ctx, fmt.Sprintf("INSERT INTO %s (id, qty) VALUES ('other', 0)", table)); err != nil {
		t.Fatal(err)
	}
	run := func(first, second string, claimed chan<- struct{}, proceed <-chan struct{}) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := g.InPgx(tx).Claim(ctx, fence.Token(10), first); err != nil {
				return err
			}
			close(claimed)
			<-proceed
			return g.InPgx(tx).Claim(ctx, fence.Token(10), second)
		})
	}
	e1, e2 := suitekit.InOppositeOrders(run, "acct", "other")
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("transactions ended %v and %v, want one through and one deadlock victim", e1, e2)
	}
	victim := errors.Join(e1, e2)
	var pe *pgconn.PgError
	if !errors.Is(victim, sqlfence.ErrRetry) || !errors.As(victim, &pe) || pe.Code != "40P01" {
		t.Fatalf("victim's error = %v, want ErrRetry wrapping SQLSTATE 40P01", victim)
	}
}

// TestNewPgxBadInput: bad input is refused before any statement runs.
func TestNewPgxBadInput(t *testing.T) {
	t.Parallel()
	if _, err := sqlfence.NewPgx(nil, "t"); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("nil pool = %v, want ErrInvalid", err)
	}
	pool := testsvc.OpenPgx(t, "postgres://127.0.0.1:1/none")
	for name, opts := range map[string][]sqlfence.Option{
		"MySQL dialect": {sqlfence.WithDialect(sqlfence.MySQL)},
		"bad key":       {sqlfence.WithKeyColumn("a-b")},
	} {
		if _, err := sqlfence.NewPgx(pool, "t", opts...); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("%s = %v, want ErrInvalid", name, err)
		}
	}
	g, err := sqlfence.NewPgx(pool, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Update(t.Context(), fence.Token(0), "k", sqlfence.Values{"v": 1}); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("token 0 = %v, want ErrInvalid without a server", err)
	}
}
