package sqllock

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Dialect is the SQL flavour of the database. It is one type across
// latchkey's SQL packages: sqllock.Postgres, sqlstore.Postgres,
// sqlfence.Postgres and state.Postgres are the same value.
type Dialect = sqldialect.Dialect

// The dialects.
const (
	// Detect picks the dialect from the *sql.DB's driver: pgx's stdlib
	// driver and lib/pq mean Postgres, a driver type mentioning sqlite means
	// SQLite.
	Detect = sqldialect.Unknown
	// Postgres is PostgreSQL 12 or later.
	Postgres = sqldialect.Postgres
	// SQLite is SQLite 3.42 or later (modernc.org/sqlite qualifies).
	SQLite = sqldialect.SQLite
)

// queries are the statements for one dialect and table. Parameters are
// written $1, $2...; SQLite gets ?1, ?2....
type queries struct {
	migrate []string
	acquire string // $1 key, $2 owner, $3 ttl ms -> token, holder's remaining ms (at least 1)
	holder  string // $1 key -> remaining ms (SQLite; PostgreSQL's acquire says it)
	renew   string // $1 key, $2 owner, $3 ttl ms -> rows affected
	release string // $1 key, $2 owner -> rows (PostgreSQL also notifies)
	batch   string // $1 keys, $2 owners, $3 ttls -> renewed keys
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func newQueries(d Dialect, table, channel string) (queries, error) {
	if !identRE.MatchString(table) {
		return queries{}, fmt.Errorf("table name %q is not a plain SQL identifier", table)
	}
	var nowMS, nowUS, greatest string
	switch d {
	case Postgres:
		nowMS = "(extract(epoch from clock_timestamp())*1000)::bigint"
		nowUS = "(extract(epoch from clock_timestamp())*1000000)::bigint"
		greatest = "GREATEST"
	case SQLite:
		nowMS = "CAST(unixepoch('subsec')*1000 AS INTEGER)"
		nowUS = "CAST(unixepoch('subsec')*1000000 AS INTEGER)"
		greatest = "MAX"
	default:
		return queries{}, fmt.Errorf("cannot tell the SQL dialect (%v): pass sqllock.Postgres or sqllock.SQLite", d)
	}
	r := strings.NewReplacer("{table}", table, "{now_ms}", nowMS, "{now_us}", nowUS, "{greatest}", greatest, "{channel}", channel)
	q := queries{
		migrate: []string{r.Replace(`CREATE TABLE IF NOT EXISTS {table} (
	key        TEXT PRIMARY KEY,
	owner      TEXT,
	expires_at BIGINT NOT NULL,
	token      BIGINT NOT NULL
)`)},
		acquire: r.Replace(`INSERT INTO {table} AS l (key, owner, expires_at, token)
VALUES ($1, $2, {now_ms} + $3, {now_us})
ON CONFLICT (key) DO UPDATE
SET owner = excluded.owner, expires_at = excluded.expires_at, token = {greatest}(l.token + 1, excluded.token)
WHERE l.owner IS NULL OR l.expires_at <= {now_ms}
RETURNING token, 0`),
		holder: r.Replace(`SELECT expires_at - {now_ms} FROM {table} WHERE key = $1 AND owner IS NOT NULL`),
		renew:  r.Replace(`UPDATE {table} SET expires_at = {now_ms} + $3 WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}`),
	}
	switch d {
	case Postgres:
		// One round trip either way: the outer SELECT reads the snapshot
		// from before the INSERT, so when nothing was acquired it sees the
		// holder's row.
		q.acquire = "WITH acquired AS (\n" + q.acquire + "\n)\n" + r.Replace(`SELECT token, 0::bigint FROM acquired
UNION ALL
SELECT NULL, GREATEST(expires_at - {now_ms}, 1) FROM {table}
WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM acquired)`)
		q.release = r.Replace(`WITH released AS (
	UPDATE {table} SET owner = NULL, expires_at = 0
	WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}
	RETURNING key
) SELECT 1 FROM released, LATERAL (SELECT pg_notify('{channel}', $3)) AS n`)
		q.batch = r.Replace(`UPDATE {table} AS l SET expires_at = {now_ms} + v.ttl
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v(key, owner, ttl)
WHERE l.key = v.key AND l.owner = v.owner AND l.expires_at > {now_ms}
RETURNING l.key`)
	case SQLite:
		q.release = r.Replace(`UPDATE {table} SET owner = NULL, expires_at = 0
WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}
RETURNING key`)
		// $1 is a JSON array of [key, owner, ttl] triples.
		q.batch = r.Replace(`UPDATE {table} AS l SET expires_at = {now_ms} + v.ttl
FROM (SELECT value->>0 AS key, value->>1 AS owner, value->>2 AS ttl FROM json_each($1)) AS v
WHERE l.key = v.key AND l.owner = v.owner AND l.expires_at > {now_ms}
RETURNING key`) // SQLite's RETURNING sees only the target's columns, unqualified
		q.migrate, q.acquire, q.holder, q.renew, q.release, q.batch =
			sqliteParams(q.migrate), toSQLite(q.acquire), toSQLite(q.holder), toSQLite(q.renew), toSQLite(q.release), toSQLite(q.batch)
	}
	return q, nil
}

func toSQLite(s string) string { return sqldialect.SQLite.Rebind(s) }

func sqliteParams(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = toSQLite(s)
	}
	return out
}
