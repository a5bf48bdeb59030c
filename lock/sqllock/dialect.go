package sqllock

import (
	"fmt"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Dialect is the SQL flavour of the database: Detect, Postgres or SQLite.
// It is one type across latchkey's SQL packages (sqllock.Postgres and
// sqlstore.Postgres are the same value). New refuses a server older than
// latchkey supports, naming the version it needs.
type Dialect = sqldialect.Dialect

// The dialects. Detect tells PostgreSQL (pgx's stdlib driver, lib/pq) from
// SQLite (modernc.org/sqlite qualifies) by the *sql.DB's driver.
const (
	Detect   = sqldialect.Unknown
	Postgres = sqldialect.Postgres
	SQLite   = sqldialect.SQLite
)

// channelSuffix names the PostgreSQL channel releases notify, after the table.
const channelSuffix = "_released"

// queries are the statements for one dialect and table.
type queries struct {
	migrate []string
	acquire string // $1 key, $2 owner, $3 ttl ms -> token, holder's remaining ms (at least 1)
	holder  string // $1 key -> remaining ms (SQLite; PostgreSQL's acquire says it)
	renew   string // $1 key, $2 owner, $3 ttl ms -> rows affected
	release string // $1 key, $2 owner -> rows (PostgreSQL also notifies)
	batch   string // $1 keys, $2 owners, $3 ttls -> renewed keys
}

func newQueries(d Dialect, table string) (queries, error) {
	if !d.Supported() {
		return queries{}, fmt.Errorf("cannot tell the SQL dialect (%v): pass sqllock.Postgres or sqllock.SQLite", d)
	}
	if err := sqldialect.Ident("table", table, channelSuffix); err != nil {
		return queries{}, err
	}
	fill := func(q string) string { return d.Fill(q, "{table}", table, "{channel}", table+channelSuffix) }
	q := queries{
		migrate: []string{fill(`CREATE TABLE IF NOT EXISTS {table} (
	key        TEXT PRIMARY KEY,
	owner      TEXT,
	expires_at BIGINT NOT NULL,
	token      BIGINT NOT NULL
)`)},
		holder: fill(`SELECT expires_at - {now_ms} FROM {table} WHERE key = $1 AND owner IS NOT NULL`),
		renew:  fill(`UPDATE {table} SET expires_at = {now_ms} + $3 WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}`),
	}
	acquire := `INSERT INTO {table} AS l (key, owner, expires_at, token)
VALUES ($1, $2, {now_ms} + $3, {now_us})
ON CONFLICT (key) DO UPDATE
SET owner = excluded.owner, expires_at = excluded.expires_at, token = {greatest}(l.token + 1, excluded.token)
WHERE l.owner IS NULL OR l.expires_at <= {now_ms}
RETURNING token`
	switch d {
	case Postgres:
		// One round trip either way: the outer SELECT reads the snapshot
		// from before the INSERT, so when nothing was acquired it sees the
		// holder's row.
		q.acquire = fill("WITH acquired AS (\n" + acquire + "\n)\n" + `SELECT token, 0::bigint FROM acquired
UNION ALL
SELECT NULL, GREATEST(expires_at - {now_ms}, 1) FROM {table}
WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM acquired)`)
		q.release = fill(`WITH released AS (
	UPDATE {table} SET owner = NULL, expires_at = 0
	WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}
	RETURNING key
) SELECT 1 FROM released, LATERAL (SELECT pg_notify('{channel}', $3)) AS n`)
		q.batch = fill(`UPDATE {table} AS l SET expires_at = {now_ms} + v.ttl
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v(key, owner, ttl)
WHERE l.key = v.key AND l.owner = v.owner AND l.expires_at > {now_ms}
RETURNING l.key`)
	case SQLite:
		q.acquire = fill(acquire + ", 0")
		q.release = fill(`UPDATE {table} SET owner = NULL, expires_at = 0
WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}
RETURNING key`)
		// $1 is a JSON array of [key, owner, ttl] triples.
		q.batch = fill(`UPDATE {table} AS l SET expires_at = {now_ms} + v.ttl
FROM (SELECT json_extract(value, '$[0]') AS key, json_extract(value, '$[1]') AS owner,
	json_extract(value, '$[2]') AS ttl FROM json_each($1)) AS v
WHERE l.key = v.key AND l.owner = v.owner AND l.expires_at > {now_ms}
RETURNING key`) // SQLite's RETURNING sees only the target's columns, unqualified
	}
	return q, nil
}
