// Package state makes updates of SQL rows safe against duplicates and races
// without locks, in two ways, on PostgreSQL, SQLite and MySQL or MariaDB
// through database/sql.
//
// [Machine] moves a row's status column along declared transitions
// (UNPAID -> PAID, PAID -> REFUNDED, ...). A move is one conditional UPDATE:
//
//	UPDATE orders SET status = 'PAID' WHERE id = $1 AND status IN ('UNPAID')
//
// so of two concurrent attempts, or a payment callback delivered twice,
// exactly one changes the row. When no row changed, the caller is told why: the
// row was already in the target state ([Duplicate]: the operation had already
// taken effect, an idempotent success) or it is in a state from which the
// move is not declared ([ErrIllegal]).
//
// [Optimistic] updates a row whose version column is bumped on every write.
// It reads the row, runs the caller's function on what it read, and writes the
// result only if the version is still the one it read; otherwise it reads
// again and re-runs the function, a bounded number of times, with jittered
// backoff between attempts. The check compares the version, never business
// values, so a value that changed and changed back (ABA) is still a conflict.
//
// On MySQL 8.0 and MariaDB 10.6 or later, under READ COMMITTED or REPEATABLE
// READ, both are the same single UPDATE: the status or the version always
// changes, so the affected rows count matched rows whatever the client's
// clientFoundRows. The read that tells Duplicate from ErrIllegal after a miss
// is a locking read (LOCK IN SHARE MODE), which sees the latest committed
// row rather than the snapshot of the caller's REPEATABLE READ transaction.
// Optimistic's first read is a plain one: inside such a transaction, whose
// snapshot does not move, use WithAttempts(1) and retry the transaction. On
// every dialect a deadlock or lock wait timeout is an error wrapping
// [ErrRetry].
//
// On pgx without database/sql, package state/pgxstate makes a Machine or an
// Optimistic on a pgx pool, and [Machine.On](pgxstate.Conn(tx)) runs one in
// your pgx.Tx; any other driver fits through a [Conn].
//
// This package imports only the standard library.
package state
