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

	recordSQL = `UPDATE {t} SET state = 2, token = NULL, result = $3, expires_ms = {now_ms} + $4
WHERE idem_key = $1 AND token = $2 AND state = 1`

	releaseSQL = `DELETE FROM {t} WHERE idem_key = $1 AND token = $2 AND state = 1`

	purgeSQL = `DELETE FROM {t} WHERE expires_ms < {now_ms}`

	putTokenSQL = `INSERT INTO {tt} (token, bind, expires_ms) VALUES ($1, $2, {now_ms} + $3)`

	consumeTokenSQL = `DELETE FROM {tt} WHERE token = $1 RETURNING bind, expires_ms - {now_ms}`

	purgeTokensSQL = `DELETE FROM {tt} WHERE expires_ms < {now_ms}`
)
