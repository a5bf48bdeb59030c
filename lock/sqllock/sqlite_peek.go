package sqllock

import (
	"context"
	"database/sql"
	"time"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/lock"
)

// peekSQLite is SQLite's look at key before the acquiring statement: a read,
// which in WAL mode waits for no writer. It returns lock.ErrNotAcquired, with
// the holder's time left, while a lock holder's lease runs, and a
// *lock.ModeError while another mode holds the name; nil sends the attempt
// on to the upsert, which decides again. SQLite lets one writer in at a time
// and its busy handler retries a waiting writer every 100 ms, in no order:
// twenty processes polling a held lock with an upsert each kept the write
// lock so busy that some of them, and the holder's renewal, waited for it
// longer than a minute.
// A refused attempt on a lock another Locker holds marks the row, as the
// upsert would have (see waitedMark), in a write of its own that only the
// read asks for: at most once per waitedRenew and waiter.
func (b *backend) peekSQLite(ctx context.Context, key, owner string) (time.Duration, error) {
	var held sql.NullInt64
	var rw, permits int64
	var mark sql.NullBool
	ok, err := sqlconn.ScanOne(b.db.QueryRow(ctx, b.q.holder, key, owner), &held, &rw, &permits, &mark)
	switch {
	case err != nil || !ok:
		return 0, nil // the upsert will say
	case rw != 0 || permits != 0:
		return 0, modeError(key, lock.ModeLock, 0, rw, permits)
	case held.Valid && held.Int64 > 0:
		if mark.Bool {
			_, _ = b.db.Exec(ctx, b.q.mark, key, owner) // a hint: the safety-net poll covers a lost one
		}
		return time.Duration(held.Int64) * time.Millisecond, lock.ErrNotAcquired
	}
	return 0, nil
}
