package sqldialect

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// DB is what a statement runs on: *sql.DB, *sql.Tx and *sql.Conn all
// satisfy it. fence/sqlfence and state re-export it.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ DB = (*sql.DB)(nil)
	_ DB = (*sql.Tx)(nil)
	_ DB = (*sql.Conn)(nil)
)

// Values are the columns a write sets, by name. fence/sqlfence and state
// re-export it.
type Values map[string]any

// Columns returns the names of values sorted (a fixed statement text for the
// same columns), or an error if one is not a plain identifier or is among
// reserved (columns the caller's statement sets itself).
func Columns(values Values, reserved ...string) ([]string, error) {
	cols := make([]string, 0, len(values))
	for c := range values {
		if err := Ident("column", c); err != nil {
			return nil, err
		}
		if slices.Contains(reserved, c) {
			return nil, fmt.Errorf("values may not set column %q", c)
		}
		cols = append(cols, c)
	}
	slices.Sort(cols)
	return cols, nil
}
