package sqlinbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestMySQLKilledConnectionRollsBackTogether: the consumer's connection is
// killed on the server after the payment was written in the inbox's
// transaction and before the commit. Neither the payment nor the inbox row
// may stay, and the redelivery pays once.
func TestMySQLKilledConnectionRollsBackTogether(t *testing.T) {
	dsn := testsvc.MySQL(t)
	e := newEnv(t, backend{"mysql", "mysql", func(*testing.T) string { return dsn }})
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	m := dedup.Message{ID: "pay-killed"}
	o, err := e.in.Process(ctx, m, func(ctx context.Context, tx *sql.Tx, m dedup.Message) error {
		if err := e.pay(ctx, tx, m); err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return err
		}
		_, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		return err
	})
	if o == dedup.OutcomeProcessed || err == nil {
		t.Fatalf("Process on a killed connection = %v, %v; want a failure", o, err)
	}
	if l, i := e.rows(t, m.ID); l != 0 || i != 0 {
		t.Fatalf("after the kill: %d ledger rows, %d inbox rows; want none of either", l, i)
	}
	payOnce(ctx, t, e, process(e.in), e.pay, m)
}

// TestMySQLDuplicateUnderClientFoundRows: with clientFoundRows=true the
// driver counts a duplicate's untouched row as affected; the claim must
// still call it a duplicate.
func TestMySQLDuplicateUnderClientFoundRows(t *testing.T) {
	dsn := testsvc.MySQL(t, "clientFoundRows", "true")
	e := newEnv(t, backend{"mysql", "mysql", func(*testing.T) string { return dsn }})
	ctx := t.Context()
	m := dedup.Message{ID: "pay-twice"}
	for i, want := range []dedup.Outcome{dedup.OutcomeProcessed, dedup.OutcomeDuplicate, dedup.OutcomeDuplicate} {
		if o, err := e.in.Process(ctx, m, e.pay); o != want || err != nil {
			t.Fatalf("delivery %d: %v, %v; want %v", i+1, o, err, want)
		}
	}
	if l, _ := e.rows(t, m.ID); l != 1 {
		t.Fatalf("%d payments for one message", l)
	}
}
