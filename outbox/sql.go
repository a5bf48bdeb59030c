package outbox

import (
	"strconv"
	"strings"

	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

// The tables, after the outbox table T (WithTable):
//
//	T         the messages: id (insertion order), msg_id, topic, msg_key,
//	          key_seq, payload, headers (JSON), created_ms, published_ms
//	          (NULL while pending); indexed on (published_ms, id) for the
//	          relay's scan and the purge, unique on msg_id and on
//	          (msg_key, key_seq)
//	T_keys    the last sequence number given to each key
//	T_relay   one row: the highest term token that marked, its leader
//
// Per-key order: Add raises the key's row of T_keys in the caller's
// transaction, which holds that row's lock until it commits or rolls back.
// So the messages of one key get their numbers in commit order, without
// gaps (a rollback gives its number back), and each is inserted, with a
// higher id, only after the one before it committed: the relay's scan in id
// order meets a key's messages in sequence.

// Suffixes of the tables and indexes named after the outbox table.
const (
	keysSuffix  = "_keys"
	relaySuffix = "_relay"
	scanSuffix  = "_scan"
	orderSuffix = "_order"
)

var migrations = map[sqldialect.Dialect][]string{
	sqldialect.Postgres: {
		`CREATE TABLE IF NOT EXISTS {t} (
	id           BIGSERIAL PRIMARY KEY,
	msg_id       TEXT   NOT NULL UNIQUE,
	topic        TEXT   NOT NULL,
	msg_key      TEXT   NOT NULL,
	key_seq      BIGINT,
	payload      BYTEA  NOT NULL,
	headers      TEXT   NOT NULL,
	created_ms   BIGINT NOT NULL,
	published_ms BIGINT
)`,
		`CREATE INDEX IF NOT EXISTS {scan} ON {t} (published_ms, id)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS {order} ON {t} (msg_key, key_seq)`,
		`CREATE TABLE IF NOT EXISTS {k} (msg_key TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)`,
		relayTable,
		relayRow,
	},
	sqldialect.SQLite: {
		`CREATE TABLE IF NOT EXISTS {t} (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	msg_id       TEXT    NOT NULL UNIQUE,
	topic        TEXT    NOT NULL,
	msg_key      TEXT    NOT NULL,
	key_seq      INTEGER,
	payload      BLOB    NOT NULL,
	headers      TEXT    NOT NULL,
	created_ms   INTEGER NOT NULL,
	published_ms INTEGER
)`,
		`CREATE INDEX IF NOT EXISTS {scan} ON {t} (published_ms, id)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS {order} ON {t} (msg_key, key_seq)`,
		`CREATE TABLE IF NOT EXISTS {k} (msg_key TEXT PRIMARY KEY, last_seq INTEGER NOT NULL)`,
		relayTable,
		relayRow,
	},
	sqldialect.MySQL: {
		`CREATE TABLE IF NOT EXISTS {t} (
	id           BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
	msg_id       VARBINARY(1024) NOT NULL,
	topic        TEXT            NOT NULL,
	msg_key      VARBINARY(1024) NOT NULL,
	key_seq      BIGINT,
	payload      LONGBLOB        NOT NULL,
	headers      TEXT            NOT NULL,
	created_ms   BIGINT          NOT NULL,
	published_ms BIGINT,
	UNIQUE INDEX {t_bare}_msg_id (msg_id),
	INDEX {scan} (published_ms, id),
	UNIQUE INDEX {order} (msg_key, key_seq)
) ENGINE=InnoDB`,
		`CREATE TABLE IF NOT EXISTS {k} (msg_key VARBINARY(1024) NOT NULL PRIMARY KEY, last_seq BIGINT NOT NULL) ENGINE=InnoDB`,
		relayTable + ` ENGINE=InnoDB`,
		`INSERT INTO {r} (one, token, leader, marks, updated_ms) VALUES (1, 0, '', 0, 0) ON DUPLICATE KEY UPDATE one = one`,
	},
}

const (
	relayTable = `CREATE TABLE IF NOT EXISTS {r} (
	one        INTEGER      NOT NULL PRIMARY KEY,
	token      BIGINT       NOT NULL,
	leader     VARCHAR(255) NOT NULL,
	marks      BIGINT       NOT NULL,
	updated_ms BIGINT       NOT NULL
)`
	relayRow = `INSERT INTO {r} (one, token, leader, marks, updated_ms) VALUES (1, 0, '', 0, 0) ON CONFLICT (one) DO NOTHING`
)

// Statements.
const (
	// nextSeqSQL raises a key's counter and returns its new value; the row
	// stays locked until the caller's transaction ends.
	nextSeqSQL = `INSERT INTO {k} (msg_key, last_seq) VALUES ($1, 1)
ON CONFLICT (msg_key) DO UPDATE SET last_seq = {k_bare}.last_seq + 1 RETURNING last_seq`
	// mysqlNextSeqSQL is nextSeqSQL with the value in LAST_INSERT_ID.
	mysqlNextSeqSQL = `INSERT INTO {k} (msg_key, last_seq) VALUES ($1, LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE last_seq = LAST_INSERT_ID(last_seq + 1)`

	insertSQL = `INSERT INTO {t} (msg_id, topic, msg_key, key_seq, payload, headers, created_ms)
VALUES ($1, $2, $3, $4, $5, $6, {now_ms})`

	pendingSQL = `SELECT id, msg_id, topic, msg_key, key_seq, payload, headers, created_ms
FROM {t} WHERE published_ms IS NULL`

	// fenceSQL raises the relay row's token to the caller's, refused when
	// the row holds a higher one. marks always changes, so the affected-row
	// count is the match on every dialect.
	fenceSQL = `UPDATE {r} SET token = $1, leader = $2, marks = marks + 1, updated_ms = {now_ms}
WHERE one = 1 AND token <= $3`

	purgeSQL = `DELETE FROM {t} WHERE published_ms IS NOT NULL AND published_ms < {now_ms} - $1`

	pendingStatsSQL = `SELECT COUNT(*), COALESCE(MIN(created_ms), 0), {now_ms} FROM {t} WHERE published_ms IS NULL`
	publishedSQL    = `SELECT COUNT(*) FROM {t} WHERE published_ms IS NOT NULL`
	relayStateSQL   = `SELECT token, leader, updated_ms FROM {r} WHERE one = 1`
)

// pendingSQL is the relay's scan: up to limit pending messages in
// insertion order, leaving out the keys and the ids of unordered messages
// that back off, so that a key whose messages fill a batch cannot hold back
// the others.
func (o *Outbox) pendingSQL(keys, ids []string, limit int) (string, []any) {
	var b strings.Builder
	b.WriteString(pendingSQL)
	args := make([]any, 0, len(keys)+len(ids)+1)
	for _, c := range []struct {
		col  string
		vals []string
	}{{"msg_key", keys}, {"msg_id", ids}} {
		if len(c.vals) == 0 {
			continue
		}
		b.WriteString(" AND " + c.col + " NOT IN (")
		for i, v := range c.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			args = append(args, v)
			b.WriteString("$" + strconv.Itoa(len(args)))
		}
		b.WriteString(")")
	}
	args = append(args, limit)
	b.WriteString(" ORDER BY id LIMIT $" + strconv.Itoa(len(args)))
	return o.sql(b.String()), args
}

// markSQL is the statement that marks n rows, by id, as published.
func (o *Outbox) markSQL(n int) string {
	var b strings.Builder
	b.WriteString(`UPDATE {t} SET published_ms = {now_ms} WHERE published_ms IS NULL AND id IN (`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(i+1))
	}
	b.WriteString(")")
	return o.sql(b.String())
}

// sql fills in a statement template for the outbox's dialect and tables.
func (o *Outbox) sql(q string) string {
	bare := sqldialect.Bare(o.table)
	return o.dialect.Fill(q,
		"{t_bare}", bare,
		"{t}", o.table,
		"{k_bare}", bare+keysSuffix,
		"{k}", o.table+keysSuffix,
		"{r}", o.table+relaySuffix,
		"{scan}", bare+scanSuffix,
		"{order}", bare+orderSuffix,
	)
}
