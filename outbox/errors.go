package outbox

import (
	"errors"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Sentinel errors. Callers test for them with errors.Is; a database's or a
// publisher's own error is wrapped, never replaced.
var (
	// ErrInvalid wraps every bad argument: a nil database, a table name that
	// is not a plain identifier, an option out of range, a message without a
	// topic or with a bad id. Nothing was written.
	ErrInvalid = errors.New("outbox: invalid argument")

	// ErrFenced means a relay's write was refused because a relay with a
	// higher term token has written since: this relay was deposed (paused,
	// cut off, or its term expired) and must stop. Nothing was marked or
	// purged.
	ErrFenced = errors.New("outbox: fenced: a newer relay term has written")

	// ErrRetry is wrapped into the database's error when Add failed on a
	// deadlock, a lock wait timeout or a serialization failure: roll the
	// caller's transaction back and run it again. It is the same value as
	// sqlinbox.ErrRetry and state.ErrRetry.
	ErrRetry = sqldialect.ErrRetry
)
