package state

import (
	"errors"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrIllegal means the row is in a state from which the requested
	// transition is not declared (or the transition is declared from no
	// state at all). Nothing changed.
	ErrIllegal = errors.New("state: illegal transition")

	// ErrNotFound means no row has the key. Nothing changed.
	ErrNotFound = errors.New("state: row not found")

	// ErrConflict means every attempt of an optimistic update found the row's
	// version changed by another writer before it could write. Nothing was
	// written by the update.
	ErrConflict = errors.New("state: version conflict")

	// ErrInvalid wraps every bad-input error (nil db, bad identifier, empty
	// transition table). Such calls change nothing and touch no server.
	ErrInvalid = errors.New("state: invalid argument")

	// ErrRetry is wrapped into the database's error when a statement failed
	// on a deadlock, a lock wait timeout or a serialization failure (two
	// transactions moving two rows in opposite orders, say). Nothing of the
	// statement was applied; roll the transaction back and run it again from
	// its start. The driver's error stays in the chain. It is the same value
	// as sqlfence.ErrRetry and sqlinbox.ErrRetry.
	ErrRetry = sqldialect.ErrRetry
)
