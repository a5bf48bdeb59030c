package sqllock

import (
	"fmt"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// Dialect is the SQL flavour of the database: Detect, Postgres, SQLite or
// MySQL (MySQL 8.0 and MariaDB 10.6 or later).
// It is one type across latchkey's SQL packages (sqllock.Postgres and
// sqlstore.Postgres are the same value). New refuses a server older than
// latchkey supports, naming the version it needs.
type Dialect = sqldialect.Dialect

// The dialects New, NewRW and NewSemaphores take.
const (
	// Detect tells the others apart by the *sql.DB's driver: PostgreSQL
	// (pgx's stdlib driver, lib/pq), SQLite (modernc.org/sqlite) and MySQL
	// or MariaDB (github.com/go-sql-driver/mysql).
	Detect = sqldialect.Unknown
	// Postgres is PostgreSQL.
	Postgres = sqldialect.Postgres
	// SQLite is SQLite (modernc.org/sqlite, pure Go).
	SQLite = sqldialect.SQLite
	// MySQL is MySQL 8.0 or MariaDB 10.6 and later (not for NewRW yet).
	MySQL = sqldialect.MySQL
)

// channelSuffix names the PostgreSQL channel releases notify, after the table.
const channelSuffix = "_released"

// queries are the statements for one dialect and table.
type queries struct {
	migrate []string
	acquire string // $1 key, $2 owner, $3 ttl ms -> token, holder's remaining ms (at least 1)
	holder  string // $1 key -> remaining ms (SQLite, MySQL; PostgreSQL's acquire says it)
	renew   string // $1 key, $2 owner, $3 ttl ms -> rows affected
	release string // $1 key, $2 owner -> rows (PostgreSQL also notifies)
	relabel string // $1 key, $2 owner, $3 new owner -> rows (PostgreSQL also notifies); MySQL: $1 new owner, $2 key, $3 owner
	batch   string // $1 keys, $2 owners, $3 ttls -> renewed keys
	// held (MySQL) lists the keys of a batch that their owners hold, after
	// the batch's UPDATE, which returns none.
	held string
}

func newQueries(d Dialect, table string) (queries, error) {
	if !d.Supported() {
		return queries{}, fmt.Errorf("cannot tell the SQL dialect (%v): pass sqllock.Postgres, sqllock.SQLite or sqllock.MySQL", d)
	}
	if err := sqldialect.Ident("table", table, channelSuffix); err != nil {
		return queries{}, err
	}
	fill := func(q string) string { return d.Fill(q, "{table}", table, "{channel}", table+channelSuffix) }
	if d == MySQL {
		return mysqlQueries(fill), nil
	}
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
		q.relabel = fill(`WITH relabeled AS (
	UPDATE {table} SET owner = $3
	WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}
	RETURNING key
) SELECT 1 FROM relabeled, LATERAL (SELECT pg_notify('{channel}', $4)) AS n`)
		q.batch = fill(`UPDATE {table} AS l SET expires_at = {now_ms} + v.ttl
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v(key, owner, ttl)
WHERE l.key = v.key AND l.owner = v.owner AND l.expires_at > {now_ms}
RETURNING l.key`)
	case SQLite:
		// The insert only where no other mode holds the key (modes.go);
		// the SELECT's WHERE also keeps the upsert apart from its ON.
		q.acquire = fill(`INSERT INTO {table} AS l (key, owner, expires_at, token)
SELECT $1, $2, {now_ms} + $3, {now_us}
WHERE NOT ` + rwLive + ` AND ` + semPermits + ` = 0
ON CONFLICT (key) DO UPDATE
SET owner = excluded.owner, expires_at = excluded.expires_at, token = {greatest}(l.token + 1, excluded.token)
WHERE l.owner IS NULL OR l.expires_at <= {now_ms}
RETURNING token, 0`)
		// The holder's time left, and whether other modes hold the key.
		q.holder = fill(`SELECT (SELECT expires_at - {now_ms} FROM {table} WHERE key = $1 AND owner IS NOT NULL), ` +
			rwLive + `, ` + semPermits)
		q.release = fill(`UPDATE {table} SET owner = NULL, expires_at = 0
WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}
RETURNING key`)
		q.relabel = fill(`UPDATE {table} SET owner = $3 WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}`)
		// $1 is a JSON array of [key, owner, ttl] triples.
		q.batch = fill(`UPDATE {table} AS l SET expires_at = {now_ms} + v.ttl
FROM (SELECT json_extract(value, '$[0]') AS key, json_extract(value, '$[1]') AS owner,
	json_extract(value, '$[2]') AS ttl FROM json_each($1)) AS v
WHERE l.key = v.key AND l.owner = v.owner AND l.expires_at > {now_ms}
RETURNING key`) // SQLite's RETURNING sees only the target's columns, unqualified
	}
	return q, nil
}

// mysqlQueries are the statements for MySQL and MariaDB. The key column is
// named key there too (quoted: KEY is a reserved word); keys and owners are
// binary strings, compared byte for byte. The owner is VARBINARY, not a
// BLOB: MariaDB's VALUES() of a BLOB column reads the row's value once the
// column has been assigned, which would turn "the owner is now ours" true for
// every attempt.
//
// Acquire is one INSERT ... ON DUPLICATE KEY UPDATE. The owner is assigned
// first, on the condition PostgreSQL's WHERE has (free or expired), which
// reads the old expiry; expiry and token follow on "the owner is now ours".
// (The one owner that can already hold the row is this attempt's own, after a
// lost answer: it takes its lease again with a new token, which is still a
// single holder.) The token comes back through LAST_INSERT_ID: the VALUES
// row sets it to the new row's token, the update to the raised token or to 0
// when the row stays the holder's. Held, a second statement asks how long the
// holder has left.
//
// Renewal sets the expiry through LAST_INSERT_ID, so a renewal that lands in
// the same millisecond as the last one, changing nothing, still counts as
// held. Release always changes the row (owner to NULL): its affected rows say.
// A batch renews through a join with JSON_TABLE, keys and owners hex-encoded
// so any bytes survive; when fewer rows changed than were asked, a SELECT
// tells which are still held.
func mysqlQueries(fill func(string) string) queries {
	return queries{
		migrate: []string{fill("CREATE TABLE IF NOT EXISTS {table} (\n" +
			"\t`key`      VARBINARY(1024) NOT NULL PRIMARY KEY,\n" +
			"\towner      VARBINARY(1024),\n" +
			"\texpires_at BIGINT NOT NULL,\n" +
			"\ttoken      BIGINT NOT NULL\n" +
			") ENGINE=InnoDB")},
		acquire: fill("INSERT INTO {table} (`key`, owner, expires_at, token)\n" +
			"VALUES ($1, $2, {now_ms} + $3, LAST_INSERT_ID({now_us}))\n" +
			"ON DUPLICATE KEY UPDATE\n" +
			"\towner = IF(owner IS NULL OR expires_at <= {now_ms}, VALUES(owner), owner),\n" +
			"\texpires_at = IF(owner = VALUES(owner), VALUES(expires_at), expires_at),\n" +
			"\ttoken = IF(owner = VALUES(owner), LAST_INSERT_ID(GREATEST(token + 1, VALUES(token))), token + LAST_INSERT_ID(0))"),
		holder:  fill("SELECT expires_at - {now_ms} FROM {table} WHERE `key` = $1 AND owner IS NOT NULL"),
		renew:   fill("UPDATE {table} SET expires_at = LAST_INSERT_ID({now_ms} + $1) WHERE `key` = $2 AND owner = $3 AND expires_at > {now_ms}"),
		release: fill("UPDATE {table} SET owner = NULL, expires_at = 0 WHERE `key` = $1 AND owner = $2 AND expires_at > {now_ms}"),
		// The new owner differs from the old (lock.SetHolder skips a
		// relabel to the same owner), so changed rows are matched rows.
		relabel: fill("UPDATE {table} SET owner = $1 WHERE `key` = $2 AND owner = $3 AND expires_at > {now_ms}"),
		batch: fill("UPDATE {table} AS l JOIN JSON_TABLE($1, '$[*]' COLUMNS (\n" +
			"\tk VARCHAR(2048) PATH '$[0]', o TEXT PATH '$[1]', ttl BIGINT PATH '$[2]')) AS v\n" +
			"ON l.`key` = UNHEX(v.k) AND l.owner = UNHEX(v.o)\n" +
			"SET l.expires_at = {now_ms} + v.ttl WHERE l.expires_at > {now_ms}"),
		held: fill("SELECT l.`key` FROM {table} AS l JOIN JSON_TABLE($1, '$[*]' COLUMNS (\n" +
			"\tk VARCHAR(2048) PATH '$[0]', o TEXT PATH '$[1]')) AS v\n" +
			"ON l.`key` = UNHEX(v.k) AND l.owner = UNHEX(v.o)\n" +
			"WHERE l.expires_at > {now_ms}"),
	}
}
