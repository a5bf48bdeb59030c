// Package sqldialect is everything latchkey's SQL packages (lock/sqllock,
// idem/sqlstore, fence/sqlfence, state, dedup/sqlinbox) know about SQL
// dialects, defined once: the Dialect values (re-exported by each package
// under its own name, as one type), telling them apart by a database/sql
// driver's type, the fragments that differ (the database's clock, the
// placeholder style, a few names), the identifier rule, and the oldest server
// versions supported with the check that enforces them.
//
// Packages keep their own statements, written once for every dialect as
// templates: $N placeholders and the fragments {now_ms}, {now_us},
// {greatest}, {blob} and {key}, which [Dialect.Fill] fills in.
//
// Upserts and RETURNING: PostgreSQL and SQLite share INSERT ... ON CONFLICT
// (k) DO UPDATE SET c = excluded.c [WHERE ...] [RETURNING ...]; SQLite's
// RETURNING sees only the target table's columns, so statements name them
// unqualified there.
//
// MySQL and MariaDB (one dialect, [MySQL]) have neither: a package writes its
// own text for the statements that use them, chosen on Dialect, with these
// rules, one for every package:
//
//   - Placeholders are ?, filled in order: a template for MySQL uses each $N
//     once, in ascending order (Rebind leaves any other numbering alone, and
//     the server refuses the statement).
//   - Upserts are INSERT ... ON DUPLICATE KEY UPDATE c = IF(cond, VALUES(c),
//     c), ...: it has no WHERE, so every assignment carries the condition.
//     Assignments run left to right and each sees the columns assigned before
//     it, so the columns the condition reads are assigned last. VALUES() is
//     the form MariaDB knows (MySQL 8.0.20 and later accept it with a
//     deprecation warning; MariaDB has no row alias). A condition never reads
//     a BLOB or TEXT column's VALUES(): MariaDB hands back the row's value
//     there once the column has been assigned.
//   - Nothing is returned from an UPDATE, and its affected-row count is the
//     rows changed, not matched, unless the client set CLIENT_FOUND_ROWS
//     (go-sql-driver's clientFoundRows=true), which latchkey cannot see from
//     a *sql.DB. So a statement whose outcome matters and that may leave a
//     row as it was says so through LAST_INSERT_ID(expr): the server sends
//     expr's last value back with the statement's result
//     (sql.Result.LastInsertId) when the statement evaluated it, and 0 when
//     it did not, in either mode and on that statement's own connection. An
//     UPDATE sets a column to LAST_INSERT_ID(x) with x > 0, and a match is
//     LastInsertId() != 0; an upsert puts LAST_INSERT_ID(x) in VALUES and
//     LAST_INSERT_ID(0) in the branch that keeps the row. Its value is
//     BIGINT UNSIGNED: CAST it AS SIGNED before subtracting. Statements that
//     always change the row they match (a status that moves, a version + 1,
//     an owner set to NULL) count affected rows as usual.
//   - Reads that explain a refused write read the latest committed row with
//     a locking read (LockRead), not the REPEATABLE READ snapshot of the
//     caller's transaction, which can be older than the row the write saw.
//   - Indexes are declared inside CREATE TABLE IF NOT EXISTS (MySQL 8.0 has
//     no CREATE INDEX IF NOT EXISTS); key columns are VARBINARY, compared byte
//     for byte as on the other dialects, never by a case-insensitive
//     collation.
package sqldialect

import (
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Dialect is a SQL flavour.
type Dialect int

// The dialects. Unknown is the zero value: not given, or not detected. The
// packages that take a dialect call it Detect: "find out from the driver".
const (
	Unknown Dialect = iota
	Postgres
	SQLite
	// MySQL is MySQL 8.0 and later and MariaDB 10.6 and later, through
	// github.com/go-sql-driver/mysql, on InnoDB tables.
	MySQL
)

// A spec is what one dialect does differently.
type spec struct {
	name string
	// fragments are the template names Fill replaces, and their text.
	fragments []string
	// rebind rewrites $N placeholders; nil keeps them.
	rebind func(string) string
	// maxIdent is the server's identifier limit in bytes (0: none).
	maxIdent int
	// minVersion is the oldest server supported, versionQuery reports the
	// server's (one text column), parseVersion reads that answer. A dialect
	// whose servers come in flavours with their own numbering (MySQL,
	// MariaDB) has flavour instead, which names the server and its minimum.
	minVersion   version
	versionQuery string
	parseVersion func(string) (version, error)
	flavour      func(reported string) (name string, min version)
	// lockRead is appended to a SELECT that must see the latest committed
	// row inside a transaction.
	lockRead string
}

var specs = map[Dialect]spec{
	Postgres: {
		name: "PostgreSQL",
		fragments: []string{
			// clock_timestamp(), not now(): the time of the statement, not
			// of the transaction it runs in.
			"{now_ms}", "FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
			"{now_us}", "FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT",
			"{greatest}", "GREATEST",
			"{blob}", "BYTEA",
			"{key}", "TEXT",
		},
		maxIdent:     63,
		minVersion:   version{12, 0, 0},
		versionQuery: "SHOW server_version_num",
		parseVersion: postgresVersion,
	},
	SQLite: {
		name: "SQLite",
		fragments: []string{
			// julianday keeps integral milliseconds inside, so rounding
			// recovers them exactly; SQLite's clock has no finer grain, so
			// {now_us} is the same instant in microseconds. 'now' is fixed
			// for the whole statement.
			"{now_ms}", "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)",
			"{now_us}", "(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000)",
			"{greatest}", "MAX",
			"{blob}", "BLOB",
			"{key}", "TEXT",
		},
		// ?N keeps the numbering, so a parameter may be used twice.
		rebind: func(q string) string { return dollar.ReplaceAllString(q, "?$1") },
		// 3.35 for RETURNING (and with it UPDATE ... FROM, ON CONFLICT DO
		// UPDATE). sqllock's batch renewal also needs the JSON functions,
		// built in from 3.38 and in modernc.org/sqlite.
		minVersion:   version{3, 35, 0},
		versionQuery: "SELECT sqlite_version()",
		parseVersion: dottedVersion,
	},
	MySQL: {
		name: "MySQL",
		fragments: []string{
			// Whole microseconds since the epoch in integer arithmetic, from
			// UTC_TIMESTAMP(6): exact, and free of the session's time zone
			// (UNIX_TIMESTAMP(NOW(6)) converts local time back, which is an
			// hour off in the repeated hour when daylight saving time ends).
			// UTC_TIMESTAMP is fixed for the whole statement. '1970-1-1' is
			// MySQL's relaxed form of 1970-01-01 00:00:00 (shorter on the wire).
			"{now_ms}", "(TIMESTAMPDIFF(MICROSECOND,'1970-1-1',UTC_TIMESTAMP(6))DIV 1000)",
			"{now_us}", "TIMESTAMPDIFF(MICROSECOND,'1970-1-1',UTC_TIMESTAMP(6))",
			"{greatest}", "GREATEST",
			"{blob}", "LONGBLOB",
			// MySQL indexes no TEXT column whole; bytes compare exactly.
			"{key}", "VARBINARY(1024)",
		},
		rebind:   mysqlRebind,
		maxIdent: 64,
		// MySQL 8.0 and MariaDB 10.6 for JSON_TABLE (sqllock's batch
		// renewal); everything else latchkey sends is older.
		versionQuery: "SELECT VERSION()",
		parseVersion: mysqlVersion,
		flavour:      mysqlFlavour,
		lockRead:     " LOCK IN SHARE MODE",
	},
}

var dollar = regexp.MustCompile(`\$(\d+)`)

// mysqlRebind turns $1, $2, ... into ?, which MySQL fills in order. A
// statement that uses a number twice or out of order is returned unchanged,
// so the server refuses it instead of filling in the wrong values.
func mysqlRebind(q string) string {
	next := 1
	for _, m := range dollar.FindAllStringSubmatch(q, -1) {
		if m[1] != strconv.Itoa(next) {
			return q
		}
		next++
	}
	return dollar.ReplaceAllString(q, "?")
}

// LockRead is what d appends to a SELECT that must read the latest committed
// row inside the caller's transaction rather than its snapshot: " LOCK IN
// SHARE MODE" on MySQL (MySQL 8.0 and MariaDB both accept it), where
// REPEATABLE READ snapshots are the default; empty elsewhere (PostgreSQL's
// READ COMMITTED reads the latest row in every statement, and under its
// REPEATABLE READ a write that met a newer row has failed already; SQLite
// has one writer).
func (d Dialect) LockRead() string { return specs[d].lockRead }

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	case MySQL:
		return "mysql"
	}
	return "detect"
}

// Supported reports whether d is a dialect latchkey speaks (not Unknown).
func (d Dialect) Supported() bool {
	_, ok := specs[d]
	return ok
}

// Detect tells the dialect of db from its driver's Go type name: pgx's
// stdlib driver and lib/pq mean Postgres, a type mentioning sqlite means
// SQLite, go-sql-driver's *mysql.MySQLDriver means MySQL (for MariaDB too);
// anything else is Unknown.
func Detect(db *sql.DB) Dialect {
	return FromDriverType(fmt.Sprintf("%T", db.Driver()))
}

// FromDriverType is Detect on a driver's type name, such as "*stdlib.Driver".
func FromDriverType(name string) Dialect {
	t := strings.ToLower(name)
	switch {
	case strings.Contains(t, "sqlite"):
		return SQLite
	case strings.Contains(t, "mysql"):
		return MySQL
	case strings.Contains(t, "stdlib.driver"), strings.Contains(t, "pq.driver"), strings.Contains(t, "pgx"):
		return Postgres
	}
	return Unknown
}

// Resolve returns d, or for Unknown the dialect Detect finds on db. It fails
// when that is not a supported dialect; the caller adds how to name one.
func Resolve(d Dialect, db *sql.DB) (Dialect, error) {
	if d == Unknown {
		d = Detect(db)
	}
	if !d.Supported() {
		return d, fmt.Errorf("cannot tell the SQL dialect (%v) of driver %T", d, db.Driver())
	}
	return d, nil
}

// Rebind rewrites a statement written with $N placeholders for d: SQLite
// gets ?N, MySQL ? (see the package doc for the order that needs).
func (d Dialect) Rebind(q string) string {
	if r := specs[d].rebind; r != nil {
		return r(q)
	}
	return q
}

// Fill fills in a statement template for d: the dialect's fragments
// ({now_ms} and {now_us}, the database clock in Unix milliseconds and
// microseconds as BIGINT; {greatest}, the two-argument maximum; {blob}, the
// binary column type; {key}, the type of a text key column, VARBINARY on
// MySQL, which indexes no TEXT column whole), then the caller's own names, given as old, new pairs
// as to strings.NewReplacer ("{t}", table); then Rebind.
func (d Dialect) Fill(q string, names ...string) string {
	r := strings.NewReplacer(append(append([]string(nil), specs[d].fragments...), names...)...)
	return d.Rebind(r.Replace(q))
}
