// Package sqlfence guards rows of your own SQL tables with fencing tokens, on
// PostgreSQL, SQLite and MySQL or MariaDB through database/sql, and on
// PostgreSQL through pgx without database/sql ([NewPgx], [Guard.InPgx]).
//
// Add a token column to the table you protect; it holds the highest token
// applied to the row:
//
//	ALTER TABLE accounts ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0
//
// A handler that reads before it writes claims the row first, in its
// transaction: [Guard.Read] raises the row's token to the holder's and
// returns the columns it names, in one statement, and the write follows with
// the same lease:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	acct := accounts.In(tx)
//	acct.Read(ctx, lease, "acct-1", sqlfence.Into{"balance": &balance})
//	//   UPDATE accounts SET fence_token = $1
//	//    WHERE id = $2 AND COALESCE(fence_token, 0) <= $1 RETURNING balance
//	acct.Update(ctx, lease, "acct-1", sqlfence.Values{"balance": balance - 300})
//	//   UPDATE accounts SET balance = $1, fence_token = $2
//	//    WHERE id = $3 AND COALESCE(fence_token, 0) <= $2
//	tx.Commit()
//
// Fencing the write alone does not protect a read-modify-write: the fresh
// holder (token 2) reads 1000; the paused stale holder (token 1) wakes and
// writes 900, applied because the row still carries token 0; the fresh
// holder writes 700 from its read. The balance is 700, not 600, and the
// stale holder's acknowledged debit is gone. The claim puts token 2 on the
// row before the read, so the stale write is refused.
//
// What holds:
//
//   - Inside a transaction, the claim locks the row until commit
//     (PostgreSQL: the UPDATE's row lock; SQLite: the write transaction), so
//     nothing, not even a newer holder, writes between the read and the
//     write, and a rollback undoes the claim.
//   - Without one, the claim commits by itself: every older holder's write
//     is refused from then on, and if a newer holder claims before this
//     holder writes, this holder's write is refused. An update may be
//     refused, never lost.
//
// [Guard.Claim] raises the token without reading, for a holder that reads
// with its own statements after it. [Add] makes a relative update,
// "balance = balance + $1", which needs no read. [Guard.Upsert] creates
// rows; the other calls return [fence.ErrNotFound] for a missing row and
// create nothing. Every call is one statement; a refused Read, Claim or
// Update runs a second, a SELECT of the row's token, to tell fence.ErrStale
// from fence.ErrNotFound. A write or claim with a token lower than the row's
// changes nothing and returns an error wrapping [fence.ErrStale].
//
// SQLite needs version 3.35 or later (RETURNING); open it with WAL and a
// busy timeout, as lock/sqllock's documentation describes.
//
// MySQL 8.0 and MariaDB 10.6 or later (github.com/go-sql-driver/mysql,
// InnoDB), under READ COMMITTED or REPEATABLE READ:
//
//	ALTER TABLE accounts ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0
//
// Update and Claim are one UPDATE that sets the token through
// LAST_INSERT_ID, so a claim or write that leaves the row as it was (the
// same token, the same values) is told from a refusal without relying on
// the client's clientFoundRows setting. Read has no RETURNING to use: it is
// the claim's UPDATE and then a locking SELECT of the row (LOCK IN SHARE
// MODE), two round trips, which in a transaction reads the row the UPDATE
// locked, never an older REPEATABLE READ snapshot. Upsert is one INSERT ...
// ON DUPLICATE KEY UPDATE; since that fires on any unique index, it changes a
// row only when the row met has the key given, and returns an error wrapping
// fence.ErrInvalid when the new row collides with another on a different
// unique key. The SELECT that explains a refusal is a locking read too.
//
// On pgx, a Guard from [NewPgx] runs each statement on the pool; inside your
// transaction, [Guard.InPgx](tx) with your pgx.Tx is what In(tx) is for a
// *sql.Tx. The statements are PostgreSQL's, RETURNING included.
//
// On every dialect and driver, a statement that fails on a deadlock, a lock
// wait timeout or a serialization failure (PostgreSQL's SQLSTATE 40001,
// 40P01, 55P03; pgx's *pgconn.PgError stays in the chain) returns an error
// wrapping [ErrRetry]: roll back and run the whole transaction again.
package sqlfence
