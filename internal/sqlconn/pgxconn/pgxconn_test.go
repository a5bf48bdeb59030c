package pgxconn

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

func TestTxOptions(t *testing.T) {
	for _, c := range []struct {
		in   *sql.TxOptions
		want pgx.TxOptions
	}{
		{nil, pgx.TxOptions{}},
		{&sql.TxOptions{}, pgx.TxOptions{}},
		{&sql.TxOptions{Isolation: sql.LevelReadCommitted}, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}},
		{&sql.TxOptions{Isolation: sql.LevelRepeatableRead}, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}},
		{&sql.TxOptions{Isolation: sql.LevelSnapshot}, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}},
		{&sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true}, pgx.TxOptions{IsoLevel: pgx.Serializable, AccessMode: pgx.ReadOnly}},
	} {
		got, err := TxOptions(c.in)
		if err != nil || got != c.want {
			t.Errorf("TxOptions(%+v) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	if _, err := TxOptions(&sql.TxOptions{Isolation: sql.LevelLinearizable}); err == nil {
		t.Error("LevelLinearizable mapped; PostgreSQL has no such level")
	}
}

func TestDialect(t *testing.T) {
	for _, d := range []sqldialect.Dialect{sqldialect.Unknown, sqldialect.Postgres} {
		if got, err := Dialect(d); err != nil || got != sqldialect.Postgres {
			t.Errorf("Dialect(%v) = %v, %v; want postgres", d, got, err)
		}
	}
	for _, d := range []sqldialect.Dialect{sqldialect.MySQL, sqldialect.SQLite} {
		if _, err := Dialect(d); err == nil {
			t.Errorf("Dialect(%v) accepted", d)
		}
	}
}

func TestResult(t *testing.T) {
	r := result(3)
	if n, err := r.RowsAffected(); n != 3 || err != nil {
		t.Errorf("RowsAffected = %d, %v", n, err)
	}
	if _, err := r.LastInsertId(); err == nil {
		t.Error("LastInsertId answered; PostgreSQL has none")
	}
}
