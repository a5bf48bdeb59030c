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
// {greatest} and {blob}, which [Dialect.Fill] fills in.
//
// Upserts and RETURNING: PostgreSQL and SQLite share INSERT ... ON CONFLICT
// (k) DO UPDATE SET c = excluded.c [WHERE ...] [RETURNING ...]; SQLite's
// RETURNING sees only the target table's columns, so statements name them
// unqualified there.
//
// Adding a dialect (MySQL/MariaDB, say) is one more value and its entry in
// specs: its clock (NOW(6)), its placeholders (?), its version query; and,
// since it has neither ON CONFLICT nor RETURNING, its own text for the
// statements that use them, chosen by the package on Dialect.
package sqldialect

import (
	"database/sql"
	"fmt"
	"regexp"
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
)

// A spec is what one dialect does differently.
type spec struct {
	name string
	// fragments are the template names Fill replaces, and their text.
	fragments []string
	// rebind rewrites $N placeholders; nil keeps them.
	rebind func(string) string
	// minVersion is the oldest server supported, versionQuery reports the
	// server's (one text column), parseVersion reads that answer.
	minVersion   version
	versionQuery string
	parseVersion func(string) (version, error)
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
		},
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
}

var dollar = regexp.MustCompile(`\$(\d+)`)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
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
// SQLite; anything else is Unknown.
func Detect(db *sql.DB) Dialect {
	return FromDriverType(fmt.Sprintf("%T", db.Driver()))
}

// FromDriverType is Detect on a driver's type name, such as "*stdlib.Driver".
func FromDriverType(name string) Dialect {
	t := strings.ToLower(name)
	switch {
	case strings.Contains(t, "sqlite"):
		return SQLite
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
// gets ?N.
func (d Dialect) Rebind(q string) string {
	if r := specs[d].rebind; r != nil {
		return r(q)
	}
	return q
}

// Fill fills in a statement template for d: the dialect's fragments
// ({now_ms} and {now_us}, the database clock in Unix milliseconds and
// microseconds as BIGINT; {greatest}, the two-argument maximum; {blob}, the
// binary column type), then the caller's own names, given as old, new pairs
// as to strings.NewReplacer ("{t}", table); then Rebind.
func (d Dialect) Fill(q string, names ...string) string {
	r := strings.NewReplacer(append(append([]string(nil), specs[d].fragments...), names...)...)
	return d.Rebind(r.Replace(q))
}
