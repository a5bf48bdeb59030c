// Package sqlfence guards rows of your own SQL tables with fencing tokens, on
// PostgreSQL and SQLite through database/sql.
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
package sqlfence
