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
// release with one of them behind it takes the lock for that waiter in its
// own statement, with the next token. Waiters of other Lockers are woken by
// LISTEN/NOTIFY on PostgreSQL through pgx ([NewPgx], or [New] with pgx's
// database/sql driver), where Lockers of different processes also queue on
// the server (the table <table>_queue) and take turns in the order they
// began to wait; a Locker whose release promised the lock to the Locker
// queued longest sends no attempt on the key until that promise ends (a
// second: a try of its own fails meanwhile). On MySQL and MariaDB, Lockers of different processes
// waiting for a key take turns through a named lock of the server
// (GET_LOCK), also in the order they began to wait: the statement that
// waits in line takes the lock as soon as the holder's release statement
// gives the turn back, and a Locker that released a lock
// others stand in line for joins the line (for up to a second, a try of its
// own fails meanwhile). Each such turn takes one connection of the Locker's
// pool while its Locker waits for or holds the key: at most 8 per pool, and
// half of a pool with SetMaxOpenConns; waiters beyond them poll. With lib/pq and on SQLite, waiters of
// other Lockers poll with capped backoff, timed by the holder's remaining
// lease. On PostgreSQL a release and a failed attempt's
// marks commit without waiting for the log flush: a crash of the server may
// lose one (a released lock then stays held until its lease ends), never a
// holder or a token. MySQL and MariaDB (MySQL 8.0, MariaDB 10.6 or later,
// InnoDB): a Locker prepares its statements, a handful on each connection
// it runs on (counted against the server's max_prepared_stmt_count, which
// all its clients share; one the server refuses runs unprepared;
// WithUnpreparedStatements turns it off), so each is one round trip that
// the server neither parses nor plans again, with or without
// interpolateParams=true. How the
// statements, the queue and the durability rule work is in
// docs/sqllock-internals.md.
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
