package state

import "errors"

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
)
