package sqldialect

import (
	"fmt"
	"reflect"
	"slices"
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

// Into names the columns a read returns and where to put them: column name
// -> pointer, as for sql.Row.Scan. fence/sqlfence re-exports it.
type Into map[string]any

// Dest returns the names of into sorted and their pointers in the same
// order, or an error if a name is not a plain identifier or a destination is
// not a non-nil pointer (caught here, before a statement runs).
func Dest(into Into) ([]string, []any, error) {
	cols := make([]string, 0, len(into))
	for c, p := range into {
		if err := Ident("column", c); err != nil {
			return nil, nil, err
		}
		if v := reflect.ValueOf(p); v.Kind() != reflect.Pointer || v.IsNil() {
			return nil, nil, fmt.Errorf("destination of column %q is %T, not a non-nil pointer", c, p)
		}
		cols = append(cols, c)
	}
	slices.Sort(cols)
	dest := make([]any, len(cols))
	for i, c := range cols {
		dest[i] = into[c]
	}
	return cols, dest, nil
}
