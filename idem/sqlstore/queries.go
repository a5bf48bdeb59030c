package sqlstore

// indexSuffix names each table's expiry index ({x}), after the table.
const indexSuffix = "_expires"

// Records: state 1 is a claim in progress, owned by token until expires_ms;
// state 2 is an outcome kept until expires_ms. A row is alive while
// expires_ms >= now; a dead row is taken over by the next claim, in the same
// statement that finds it dead.
var migrations = []string{
	`CREATE TABLE IF NOT EXISTS {t} (
	idem_key    TEXT     NOT NULL PRIMARY KEY,
	state       SMALLINT NOT NULL,
	token       TEXT,
	fingerprint {blob}   NOT NULL,
	result      {blob},
	expires_ms  BIGINT   NOT NULL,
	created_ms  BIGINT   NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS {t}{x} ON {t} (expires_ms)`,
	`CREATE TABLE IF NOT EXISTS {tt} (
	token      TEXT   NOT NULL PRIMARY KEY,
	bind       {blob} NOT NULL,
	expires_ms BIGINT NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS {tt}{x} ON {tt} (expires_ms)`,
}

const (
	claimSQL = `INSERT INTO {t} AS cur (idem_key, state, token, fingerprint, result, expires_ms, created_ms)
VALUES ($1, 1, $2, $3, NULL, {now_ms} + $4, {now_ms})
ON CONFLICT (idem_key) DO UPDATE SET
	state = 1, token = excluded.token, fingerprint = excluded.fingerprint, result = NULL,
	expires_ms = excluded.expires_ms, created_ms = excluded.created_ms
WHERE cur.expires_ms < {now_ms}
RETURNING token`

	lookupSQL = `SELECT state, fingerprint, result, expires_ms - {now_ms} FROM {t}
WHERE idem_key = $1 AND expires_ms >= {now_ms}`

	// postgresClaimSQL is claimSQL and lookupSQL in one round trip
	// (PostgreSQL only: SQLite has no INSERT in a WITH, MySQL no
	// RETURNING). The outer SELECT reads the snapshot from before the
	// INSERT, so when nothing was claimed it sees the live row that stopped
	// the claim: a replay is one statement. Its first column is the token
	// when the claim is ours, NULL otherwise. No row at all means the row
	// that stopped the claim committed after the statement's snapshot was
	// taken; the claim is tried again.
	postgresClaimSQL = `WITH claimed AS (
` + claimSQL + `
)
SELECT token, 1::smallint, NULL::bytea, NULL::bytea, 0::bigint FROM claimed
UNION ALL
SELECT NULL, state, fingerprint, result, expires_ms - {now_ms} FROM {t}
WHERE idem_key = $1 AND expires_ms >= {now_ms} AND NOT EXISTS (SELECT 1 FROM claimed)`

	recordSQL = `UPDATE {t} SET state = 2, token = NULL, result = $1, expires_ms = {now_ms} + $2
WHERE idem_key = $3 AND token = $4 AND state = 1`

	releaseSQL = `DELETE FROM {t} WHERE idem_key = $1 AND token = $2 AND state = 1`

	purgeSQL = `DELETE FROM {t} WHERE expires_ms < {now_ms}`

	putTokenSQL = `INSERT INTO {tt} (token, bind, expires_ms) VALUES ($1, $2, {now_ms} + $3)`

	consumeTokenSQL = `DELETE FROM {tt} WHERE token = $1 RETURNING bind, expires_ms - {now_ms}`

	purgeTokensSQL = `DELETE FROM {tt} WHERE expires_ms < {now_ms}`
)

// MySQL and MariaDB: no ON CONFLICT, no RETURNING, no CREATE INDEX IF NOT
// EXISTS (MySQL 8.0), so their own text for those statements; the others
// are shared. Keys and tokens are VARBINARY, compared byte for byte.
var mysqlMigrations = []string{
	`CREATE TABLE IF NOT EXISTS {t} (
	idem_key    VARBINARY(1024) NOT NULL PRIMARY KEY,
	state       SMALLINT        NOT NULL,
	token       VARBINARY(255),
	fingerprint {blob}          NOT NULL,
	result      {blob},
	expires_ms  BIGINT          NOT NULL,
	created_ms  BIGINT          NOT NULL,
	INDEX {t}{x} (expires_ms)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS {tt} (
	token      VARBINARY(255) NOT NULL PRIMARY KEY,
	bind       {blob}         NOT NULL,
	expires_ms BIGINT         NOT NULL,
	INDEX {tt}{x} (expires_ms)
) ENGINE=InnoDB`,
}

const (
	// mysqlClaimSQL is claimSQL as one INSERT ... ON DUPLICATE KEY UPDATE.
	// Every assignment takes over a dead row only, judged on expires_ms,
	// which is assigned last so that each condition reads the old value.
	// LAST_INSERT_ID says whether the claim is ours: 1 from the VALUES row,
	// 0 when a live row stays.
	mysqlClaimSQL = `INSERT INTO {t} (idem_key, state, token, fingerprint, result, expires_ms, created_ms)
VALUES ($1, 1, $2, $3, NULL, {now_ms} + $4 + LAST_INSERT_ID(1) - 1, {now_ms})
ON DUPLICATE KEY UPDATE
	state = IF(expires_ms < {now_ms}, 1, state),
	token = IF(expires_ms < {now_ms}, VALUES(token), token),
	fingerprint = IF(expires_ms < {now_ms}, VALUES(fingerprint), fingerprint),
	result = IF(expires_ms < {now_ms}, NULL, result),
	created_ms = IF(expires_ms < {now_ms}, VALUES(created_ms), created_ms),
	expires_ms = IF(expires_ms < {now_ms}, VALUES(expires_ms), expires_ms + LAST_INSERT_ID(0))`

	// mysqlConsumeTokenSQL spends a token in one UPDATE: it marks the row
	// spent (a negative expiry, which Purge deletes) whatever the bind, as
	// consumeTokenSQL deletes it, and LAST_INSERT_ID says whether it was
	// live and bound to $1.
	mysqlConsumeTokenSQL = `UPDATE {tt} SET expires_ms = -1 - CAST(LAST_INSERT_ID(bind = $1 AND expires_ms >= {now_ms}) AS SIGNED)
WHERE token = $2 AND expires_ms >= 0`
)
