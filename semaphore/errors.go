package semaphore

import (
	"errors"
	"fmt"
)

// ErrMismatch means an Acquire passed a permit count that differs from the
// one the name's current holders took their permits with. Nothing was taken.
var ErrMismatch = errors.New("semaphore: permit count differs from the holders'")

// A MismatchError is the error a backend returns for a permit count that
// differs from the holders'. It wraps ErrMismatch.
type MismatchError struct {
	Name    string // the semaphore
	Asked   int    // the permit count of the refused Acquire
	Holders int    // the permit count the holders agreed on
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%v: asked with %d permits, held with %d", ErrMismatch, e.Asked, e.Holders)
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }
