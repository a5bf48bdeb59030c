// Package sqllock is a lease lock on a SQL table, for PostgreSQL, SQLite and
// MySQL or MariaDB. Pass New, NewRW or NewSemaphores the dialect: Postgres,
// SQLite, MySQL, or Detect to tell them by the *sql.DB's driver; NewPgx and
// its siblings take a pgx pool for PostgreSQL.
//
// Each key has one row holding its owner, its expiry and its fencing token.
// Time always comes from the database's clock, never the client's, so clients
// with skewed clocks agree on who holds a lock. Acquiring is one statement
// that takes the row only if it is free or expired and returns the token, so
// two clients can never both succeed; renewal and release compare the owner
// in the same statement that changes the row.
//
// Tokens: a key's token is max(previous token + 1, database clock in
// microseconds). It is strictly increasing for as long as the row exists,
// which is forever unless someone deletes it; if a row is deleted, the next
// token still exceeds the deleted ones unless the database clock went back or
// the key was acquired more than a million times a second. Rows of released
// keys stay (owner NULL) to keep their counter; one row per distinct key.
//
// Waiting: a Locker's waiters for a key queue in arrival order, and a
// release with one of them behind it takes the lock for that waiter in the
// release's own statement, with the next token (one statement per
// hand-over, on every dialect). A failed attempt on a lock another Locker
// holds marks the row as waited for (for ten seconds, renewed by the
// waiter's later attempts); while it is marked, releases free the lock for
// every Locker's waiters instead, and on PostgreSQL notify. Through pgx
// ([NewPgx], or [New] with pgx's database/sql driver, github.com/jackc/pgx/v5/stdlib)
// waiters LISTEN on one shared connection per Locker, and the
// Lockers waiting for a key queue on the server (the table <table>_queue):
// a marked release promises the lock for a second to the Locker that has
// queued longest and wakes only that Locker's waiters, so Lockers of
// different processes take turns in the order they began to wait, and one
// attempt follows a release rather than one from every Locker. A Locker
// whose waiters give up leaves the queue; a queued Locker whose process
// died holds up a release by at most the promise, and only for the four
// seconds its queue row lives. On SQLite, on MySQL (which has no NOTIFY),
// and on PostgreSQL through lib/pq, a waiter of another Locker polls
// with capped backoff, timed by the holder's remaining lease. A release
// nobody marked sends no NOTIFY, which would hold a database-wide lock
// until its commit.
//
// Durability on PostgreSQL: a write that changes who holds a lock, its token
// or its expiry (an acquisition, a hand-over, a renewal, a relabel) commits
// as the server's synchronous_commit says, normally after its log reaches
// the disk. A write that only leaves a hint (a release, a failed attempt's
// mark or place in the queue, and the releases of semaphores and read-write
// locks) commits without waiting for that flush: on a crash of the server
// the last of them may be lost, which leaves a released lock held until its
// lease ends, or costs a waiter a wake-up, never a second holder or a token
// issued twice. As the log is written in order, the next acquisition's flush
// makes every hint before it durable. An acquire-and-release pair waits for
// one flush instead of two, and a release's NOTIFY, which holds a
// database-wide lock until its commit ends, no longer holds it through a
// flush.
//
// MySQL and MariaDB (github.com/go-sql-driver/mysql; MySQL 8.0, MariaDB 10.6
// or later; InnoDB): acquiring is one INSERT ... ON DUPLICATE KEY UPDATE whose
// token comes back as its LAST_INSERT_ID, one round trip; a held key costs a
// second, a SELECT of the holder's remaining lease (and, at most every five
// seconds per waiter, a third that marks the row). Renewal and release are
// one UPDATE each, and do not depend on the client's clientFoundRows setting.
// A renewal tick renews all of a Locker's leases in one UPDATE joined with
// JSON_TABLE, plus a SELECT only when some were lost. The clock is
// UTC_TIMESTAMP(6), whole microseconds, whatever the session's time zone. A
// connection killed on the server is replaced by database/sql on the next
// statement; the lease survives if that comes before its deadline. Open the
// *sql.DB with interpolateParams=true: without it the driver prepares each
// statement with arguments before running it, two round trips instead of one
// (lock/lockurl's mysql:// sets it unless the URL says otherwise).
//
// SQLite: open the database with WAL and a busy timeout, e.g.
// "file:/path/locks.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)",
// and several processes on one machine can share the file. Give each process
// one connection (db.SetMaxOpenConns(1)): SQLite lets one writer in at a time
// and its busy handler is not fair, so a process's own connections could
// starve its renewals; one connection queues them in order instead. The
// write lock belongs to a process: one frozen inside a write transaction
// (SIGSTOP, a paused VM) holds it until it resumes or dies, and every other
// process's acquisitions and renewals wait that long; where holders may be
// paused, use a server.
//
// One name, one resource: a lock, a read-write lock (NewRW; not on MySQL) and
// a semaphore (NewSemaphores) of one name exclude each other
// (with the default tables: a lock in a table of its own is apart), and an
// acquisition while another mode holds the name fails at once with a
// *lock.ModeError. SQLite checks the other modes' tables under its one write
// lock; on PostgreSQL and MySQL a read-write lock or a semaphore marks the
// name's row of the lock table as its mode's, which a lock's acquisition
// finds not free, and a lock takes over a mark only once that mode has no
// live holder (see modes.go). Every constructor creates the tables of all
// the modes.
package sqllock
