package sqllock

import (
	"fmt"
	"strconv"
	"strings"

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

// promise is the SET clause of a PostgreSQL release (v.ms the clock in
// ms): a row marked as waited for is promised to the first live Locker in
// the key's queue, if any, for promisedFor; any other release clears the
// promise.
const promise = `next_locker = CASE WHEN l.waited > v.ms THEN (SELECT q.locker FROM {table}_queue AS q
		WHERE q.key = $1 AND q.expires_at > v.ms ORDER BY q.queued_us, q.locker LIMIT 1) END,
	next_until = v.ms + {promised}`

// noFlush, returned by a PostgreSQL write that only leaves a hint (a
// release, a refused attempt's mark and place in the queue, leaving the
// queue), lets its transaction commit without waiting for the log flush
// (synchronous_commit off, for that transaction only). Lost in a crash of
// the server, such a write costs time, never safety: a lost release leaves
// the lock to expire, a lost mark or queue row a wake-up. Every write that
// changes who holds a lock, its token or its expiry (an acquisition, a
// hand-over, a renewal, a relabel) still waits; and as the log is written
// in order, its flush makes the hints before it durable too. On a disk that
// flushes in milliseconds, this halves the flushes of an acquire-and-release
// pair, and NOTIFY, which serialises commits until they are flushed, no
// longer waits for one.
const noFlush = "set_config('synchronous_commit', 'off', true)"

// channelSuffix names the PostgreSQL channel releases notify, after the table.
const channelSuffix = "_released"

// queries are the statements for one dialect and table.
type queries struct {
	migrate []string
	acquire string // $1 key, $2 owner, $3 ttl ms -> token (NULL when held), holder's remaining ms (at least 1); PostgreSQL: also false
	// acquireWaiting is PostgreSQL's acquire for a waiting Acquire, which
	// also joins or leaves the key's queue -> token, remaining ms, whether
	// its Locker may now stand in the queue (queue.go).
	acquireWaiting string
	holder         string // SQLite: $1 key, $2 owner -> remaining ms, other modes, mark (MySQL's and PostgreSQL's acquire say it)
	mark           string // SQLite: $1 key, $2 owner -> marks the row as waited for by owner's Locker
	renew          string // $1 key, $2 owner, $3 ttl ms -> rows affected
	release        string // $1 key, $2 owner -> rows (PostgreSQL also notifies, if waited for); MySQL: $1 the key's turn, $2 key, $3 owner
	// handover releases and takes the lock for the next owner in one step
	// unless another Locker's waiter marked the row: $1 key, $2 owner,
	// $3 next, $4 ttl ms -> next's token, 0 when released for everyone
	// (PostgreSQL: $5 key hash, notified then). MySQL: $1 next, $2 the
	// key's turn, $3 ttl ms, $4 key, $5 owner -> rows changed, the token as
	// LAST_INSERT_ID (notInLine or inLine when released for everyone).
	handover string
	// turnRelease and turnHandover (MySQL) are release and handover for a
	// lock taken under its key's turn (turns.go), the turn's name given
	// twice: $1 and $2 the name, $3 key, $4 owner; $1 next, $2 and $3 the
	// name, $4 ttl ms, $5 key, $6 owner.
	turnRelease, turnHandover string
	// turnTake (MySQL) waits for the key's turn and, once granted, is
	// acquire: $1 key, $2 owner, $3 ttl ms, $4 the name; LAST_INSERT_ID
	// as acquire's when the turn was granted, 0 (no row changed) when not.
	turnTake string
	relabel  string // $1 key, $2 owner, $3 new owner -> rows (PostgreSQL also notifies); MySQL: $1 new owner, $2 key, $3 owner
	batch    string // $1 keys, $2 owners, $3 ttls -> renewed keys
	// held (MySQL) lists the keys of a batch that their owners hold, after
	// the batch's UPDATE, which returns none.
	held string
	// dequeue takes a Locker out of a key's queue (PostgreSQL):
	// $1 key, $2 the Locker's id (its owners' first 16 characters).
	dequeue string
	// hasWaited reads the waited column, failing on a table made before
	// it (addWaited adds it).
	hasWaited, addWaited string
}

// A failed attempt on a lock that another Locker holds marks its row as
// waited for (the column waited: until when, in ms of the database clock),
// so that the row's releases wake waiters: PostgreSQL's notify only then,
// and a release with a waiter of its own Locker behind it takes the lock
// for that waiter in the same statement only while no other Locker's
// waiter marked the row, whose waiters then attempt with even odds. A
// waiting Acquire attempts at least once a second (the Manager's safety-net
// poll), re-marking the row once half of the mark's time has passed, so the
// mark outlives the wait; once nobody waits, releases stop notifying. A
// Locker's own waiters do not mark: its releases hand the lock to them.
// Owners whose first 16 characters agree are one Locker's (lock.Manager
// makes them so).
const (
	waitedMark  = "10000" // ms a mark lasts
	waitedRenew = "5000"  // ms left of a mark that a failed attempt leaves as it is
)

func newQueries(d Dialect, table string) (queries, error) {
	if !d.Supported() {
		return queries{}, fmt.Errorf("cannot tell the SQL dialect (%v): pass sqllock.Postgres, sqllock.SQLite or sqllock.MySQL", d)
	}
	if err := sqldialect.Ident("table", table, channelSuffix); err != nil {
		return queries{}, err
	}
	fill := func(q string) string {
		return d.Fill(q, "{table}", table, "{channel}", table+channelSuffix, "{mark}", waitedMark, "{renew}", waitedRenew,
			"{queued}", queuedFor, "{requeue}", queueRenew, "{promised}", strconv.FormatInt(promisedFor.Milliseconds(), 10), "{noflush}", noFlush)
	}
	if d == MySQL {
		return mysqlQueries(fill), nil
	}
	q := queries{
		migrate: []string{fill(`CREATE TABLE IF NOT EXISTS {table} (
	key        TEXT PRIMARY KEY,
	owner      TEXT,
	expires_at BIGINT NOT NULL,
	token      BIGINT NOT NULL,
	waited     BIGINT NOT NULL DEFAULT 0
)`)},
		renew:     fill(`UPDATE {table} SET expires_at = {now_ms} + $3 WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}`),
		hasWaited: fill(`SELECT waited FROM {table} WHERE 1 = 0`),
		addWaited: fill(`ALTER TABLE {table} ADD COLUMN waited BIGINT NOT NULL DEFAULT 0`),
	}
	// SQLite's acquisition: the upsert takes a free or expired row, or
	// marks a row another Locker holds as waited for; every condition reads
	// the one clock reading the token took (excluded.token, in µs), so the
	// columns agree. The hand-over, for SQLite and PostgreSQL: {now} and
	// {us} are one clock reading in ms and µs.
	acquire := `INSERT INTO {table} AS l (key, owner, expires_at, token)
VALUES ($1, $2, {now_ms} + $3, {now_us})
ON CONFLICT (key) DO UPDATE SET
	owner = CASE WHEN {free} THEN excluded.owner ELSE l.owner END,
	expires_at = CASE WHEN {free} THEN excluded.token / 1000 + $3 ELSE l.expires_at END,
	token = CASE WHEN {free} THEN {greatest}(l.token + 1, excluded.token) ELSE l.token END,
	waited = CASE WHEN {free} THEN l.waited ELSE excluded.token / 1000 + {mark} END
WHERE {free} OR l.waited < excluded.token / 1000 + {renew} AND {other}`
	acquire = strings.NewReplacer("{free}", "(l.owner IS NULL OR l.expires_at <= excluded.token / 1000)").Replace(acquire)
	handover := `UPDATE {table} SET
	owner = CASE WHEN waited > {now} THEN NULL ELSE $3 END,
	expires_at = CASE WHEN waited > {now} THEN 0 ELSE {now} + $4 END,
	token = CASE WHEN waited > {now} THEN token ELSE {greatest}(token + 1, {us}) END
WHERE key = $1 AND owner = $2 AND expires_at > {now}`
	switch d {
	case Postgres:
		own := "(l.owner IS NOT NULL AND l.expires_at > v.us / 1000 AND left(l.owner, 16) = left($2, 16))"
		// One round trip either way: one UPDATE takes a free or expired
		// row or marks a row another Locker holds, and an INSERT adds a
		// missing one, each conditioned on the statement's snapshot and
		// one clock reading (v), so that a failed attempt on a held row
		// writes nothing (no row lock, no commit record) unless it marks
		// the row, at most once per waitedRenew. The last SELECT reads the
		// snapshot from before the statement's writes, so when the UPDATE
		// left the row alone it sees the holder's row.
		//
		// A free row promised to another Locker's waiter (next_locker, until
		// next_until) is not taken; an attempt of a waiting Acquire
		// (acquireWaiting) joins the key's queue of Lockers (e: unless its own Locker holds
		// the lock), renewing its place at most once per queueRenew, or
		// leaves it when it takes the lock (queue.go). Like the mark, these
		// write only when they change a row: an INSERT … ON CONFLICT DO
		// UPDATE would lock the row, and flush a commit, every time.
		acquire := `WITH v AS (SELECT {now_us} AS us),
u AS (
	UPDATE {table} AS l SET
		owner = CASE WHEN {free} THEN $2 ELSE l.owner END,
		expires_at = CASE WHEN {free} THEN v.us / 1000 + $3 ELSE l.expires_at END,
		token = CASE WHEN {free} THEN GREATEST(l.token + 1, v.us) ELSE l.token END,
		next_locker = CASE WHEN {free} THEN NULL ELSE l.next_locker END,
		waited = CASE WHEN {free} THEN l.waited ELSE v.us / 1000 + {mark} END
	FROM v WHERE l.key = $1 AND ({free} OR l.owner IS NOT NULL AND l.expires_at > v.us / 1000
		AND l.waited < v.us / 1000 + {renew} AND left(l.owner, 16) <> left($2, 16))
	RETURNING l.owner = $2 AS took, l.token, l.expires_at - v.us / 1000 AS held_ms,
		CASE WHEN l.owner <> $2 THEN {noflush} END
), i AS (
	INSERT INTO {table} (key, owner, expires_at, token)
	SELECT $1, $2, v.us / 1000 + $3, v.us FROM v WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE key = $1)
	ON CONFLICT (key) DO NOTHING
	RETURNING token
){queue}
SELECT CASE WHEN took THEN token END, CASE WHEN took THEN 0 ELSE GREATEST(held_ms, 1) END, {marked?} FROM u
UNION ALL
SELECT token, 0, false FROM i
UNION ALL
SELECT NULL, GREATEST(CASE WHEN l.owner IS NOT NULL AND l.expires_at > v.us / 1000 THEN l.expires_at ELSE l.next_until END - v.us / 1000, 1),
	{queued?}
FROM {table} AS l, v
WHERE l.key = $1 AND NOT EXISTS (SELECT 1 FROM u) AND NOT EXISTS (SELECT 1 FROM i)`
		acquire = strings.ReplaceAll(acquire, "{free}", `(l.owner IS NULL OR l.expires_at <= v.us / 1000)
			AND (l.next_locker IS NULL OR l.next_until <= v.us / 1000 OR l.next_locker = left($2, 16))`)
		// The attempts of a waiting Acquire also join or leave the queue.
		queue := `, d AS (
	DELETE FROM {table}_queue AS q USING u WHERE q.key = $1 AND q.locker = left($2, 16) AND u.took
), e AS (
	SELECT v.us FROM {table} AS l, v
	WHERE l.key = $1 AND NOT EXISTS (SELECT 1 FROM u WHERE u.took) AND NOT {own}
), r AS (
	UPDATE {table}_queue AS q SET expires_at = e.us / 1000 + {queued}
	FROM e WHERE q.key = $1 AND q.locker = left($2, 16) AND q.expires_at < e.us / 1000 + {queued} - {requeue}
	RETURNING {noflush}
), n AS (
	INSERT INTO {table}_queue (key, locker, queued_us, expires_at)
	SELECT $1, left($2, 16), e.us, e.us / 1000 + {queued} FROM e
	WHERE NOT EXISTS (SELECT 1 FROM {table}_queue AS q WHERE q.key = $1 AND q.locker = left($2, 16))
	ON CONFLICT (key, locker) DO NOTHING
	RETURNING {noflush}
)`
		q.acquire = fill(strings.NewReplacer("{queue}", "", "{queued?}", "false", "{marked?}", "false").Replace(acquire))
		q.acquireWaiting = fill(strings.NewReplacer("{queue}", queue, "{queued?}", "NOT {own}", "{marked?}", "NOT took").Replace(acquire))
		q.acquireWaiting = strings.ReplaceAll(q.acquireWaiting, "{own}", own)
		// A release of a row that another Locker's waiter marked promises
		// the lock to the Locker first in the key's queue, if any, and
		// names it in the notification (queue.go).
		q.release = fill(`WITH r AS (
	UPDATE {table} AS l SET owner = NULL, expires_at = 0, ` + strings.ReplaceAll(promise, "v.ms", "{now_ms}") + `
	WHERE l.key = $1 AND l.owner = $2 AND l.expires_at > {now_ms}
	RETURNING l.waited > {now_ms} AS w, l.next_locker AS nl, {noflush}
) SELECT r.nl FROM r LEFT JOIN LATERAL (SELECT pg_notify('{channel}', $3 || COALESCE(' ' || r.nl, '')) WHERE r.w) AS n ON true`)
		// One clock reading (the CTE, evaluated once) for every condition.
		q.handover = fill("WITH v AS (SELECT {now_us} AS us, {now_us} / 1000 AS ms), h AS (\n" +
			strings.NewReplacer("{table} SET", "{table} AS l SET", "\nWHERE key", ",\n\t"+promise+"\nFROM v WHERE key",
				"{now}", "v.ms", "{us}", "v.us").Replace(handover) + `
	RETURNING owner IS NOT NULL AS handed, token, l.next_locker AS nl,
		CASE WHEN owner IS NULL THEN {noflush} END
) SELECT CASE WHEN handed THEN token ELSE 0 END FROM h
LEFT JOIN LATERAL (SELECT pg_notify('{channel}', $5 || COALESCE(' ' || h.nl, '')) WHERE NOT h.handed) AS n ON true`)
		q.dequeue = fill(`DELETE FROM {table}_queue WHERE key = $1 AND locker = $2 RETURNING {noflush}`)
		q.migrate = append(q.migrate, fill(queueTable))
		q.hasWaited = fill(`SELECT waited, next_locker, next_until FROM {table} WHERE 1 = 0`)
		q.addWaited = fill(`ALTER TABLE {table} ADD COLUMN IF NOT EXISTS waited BIGINT NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS next_locker TEXT, ADD COLUMN IF NOT EXISTS next_until BIGINT NOT NULL DEFAULT 0`)
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
		q.acquire = fill(strings.NewReplacer("VALUES ($1, $2, {now_ms} + $3, {now_us})",
			"SELECT $1, $2, {now_ms} + $3, {now_us}\nWHERE NOT "+rwLive+" AND "+semPermits+" = 0",
			"{other}", "substr(l.owner, 1, 16) <> substr($2, 1, 16)").Replace(acquire) + `
RETURNING CASE WHEN owner = $2 THEN token END, 0`)
		// The holder's time left, whether other modes hold the key, and
		// whether the attempt of owner $2 is to mark the row (peekSQLite
		// refuses an attempt on a held lock before the upsert could).
		q.holder = fill(`SELECT (SELECT expires_at - {now_ms} FROM {table} WHERE key = $1 AND owner IS NOT NULL), ` +
			rwLive + `, ` + semPermits + `, (SELECT waited < {now_ms} + {renew} AND substr(owner, 1, 16) <> substr($2, 1, 16)
	FROM {table} WHERE key = $1 AND owner IS NOT NULL AND expires_at > {now_ms})`)
		q.mark = fill(`UPDATE {table} SET waited = {now_ms} + {mark}
WHERE key = $1 AND expires_at > {now_ms} AND substr(owner, 1, 16) <> substr($2, 1, 16)`)
		q.release = fill(`UPDATE {table} SET owner = NULL, expires_at = 0
WHERE key = $1 AND owner = $2 AND expires_at > {now_ms}
RETURNING key`)
		// SQLite's 'now' is fixed for the statement; RETURNING reads the
		// new row.
		q.handover = fill(strings.NewReplacer("{now}", "{now_ms}", "{us}", "{now_us}").Replace(handover) + `
RETURNING CASE WHEN owner IS NULL THEN 0 ELSE token END`)
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

// What MySQL's acquisition leaves in LAST_INSERT_ID when it is refused:
// refusedFlag (2^62), plus otherFlag (2^41) if the holder is another
// Locker's, plus the holder's time left in ms, capped at heldCap (2^40; a
// mode's mark never expires).
const (
	// What MySQL's release, and a hand-over that freed the lock for
	// everyone, leave in LAST_INSERT_ID: whether a session of another
	// Locker stood in line for the key's turn (turns.go). A token is larger.
	notInLine = 1
	inLine    = 2

	refusedFlag = int64(1) << 62
	otherFlag   = int64(1) << 41
	heldCap     = int64(1) << 40
)

// mysqlQueries are the statements for MySQL and MariaDB. The key column is
// named key there too (quoted: KEY is a reserved word); keys and owners are
// binary strings, compared byte for byte. The owner is VARBINARY, not a
// BLOB: MariaDB's VALUES() of a BLOB column reads the row's value once the
// column has been assigned, which would turn "the owner is now ours" true for
// every attempt.
//
// Acquire is one INSERT ... ON DUPLICATE KEY UPDATE. The owner is assigned
// first, on the condition PostgreSQL's WHERE has (free or expired), which
// reads the old expiry; token and expiry follow on "the owner is now ours and
// the old expiry has passed" (the expiry assigned last, so both read the old
// one). A row that is already this owner's and live stays as it is and the
// attempt fails, as on PostgreSQL: a release may have handed the lock to this
// owner while its attempt was on its way (ReleaseHandover), and the Manager
// then holds that lease. The token comes back through LAST_INSERT_ID: the
// VALUES row sets it to the new row's token, the update to the raised token,
// or, when the row stays the holder's, to refusedFlag plus the holder's time
// left in ms (at least 1, at most heldCap): tokens, microseconds of the
// clock, stay far below refusedFlag. The same statement marks a row another
// Locker holds as waited for (the waited column, assigned after the owner and
// before the expiry, at most once per waitedRenew and waiter): a refused
// attempt is one round trip, as on PostgreSQL.
//
// Renewal sets the expiry through LAST_INSERT_ID, so a renewal that lands in
// the same millisecond as the last one, changing nothing, still counts as
// held. Release only ends the lease (expiry 0), leaving the owner: a fixed
// width column changed, which InnoDB writes in place, where a NULL owner
// would rebuild the record, and the next owner (as long) would rebuild it
// again. Every reading of the row asks for a live expiry, so the old owner
// reads as nobody. Release always changes the row: its affected rows say.
// A batch renews through a join with JSON_TABLE, keys and owners hex-encoded
// so any bytes survive; when fewer rows changed than were asked, a SELECT
// tells which are still held.
func mysqlQueries(fill func(string) string) queries {
	// acquire is the acquisition, inserting the row values gives (its token
	// is the clock in µs, which the update's {now} reads back).
	acquire := func(values string) string {
		return fill(strings.NewReplacer("{now}", "VALUES(token)DIV 1000", "{refused}", strconv.FormatInt(refusedFlag, 10), "{cap}", strconv.FormatInt(heldCap, 10), "{other}", strconv.FormatInt(otherFlag, 10)).Replace(
			"INSERT INTO {table}(`key`,owner,token,expires_at)" + values + " ON DUPLICATE KEY UPDATE " +
				"owner=IF(owner IS NULL OR expires_at<={now},VALUES(owner),owner)," +
				"waited=IF(LEFT(owner,16)<>LEFT(VALUES(owner),16)AND expires_at>{now} AND waited<{now}+{renew},{now}+{mark},waited)," +
				"token=IF(owner=VALUES(owner)AND expires_at<={now},LAST_INSERT_ID(GREATEST(token+1,VALUES(token)))," +
				"token+LEAST(LAST_INSERT_ID({refused}+IF(LEFT(owner,16)<=>LEFT(VALUES(owner),16),0,{other})+LEAST(GREATEST(expires_at-{now},1),{cap})),0))," +
				"expires_at=IF(owner=VALUES(owner)AND expires_at<={now},VALUES(expires_at),expires_at)"))
	}
	return queries{
		migrate: []string{fill("CREATE TABLE IF NOT EXISTS {table} (\n" +
			"\t`key`      VARBINARY(1024) NOT NULL PRIMARY KEY,\n" +
			"\towner      VARBINARY(1024),\n" +
			"\texpires_at BIGINT NOT NULL,\n" +
			"\ttoken      BIGINT NOT NULL,\n" +
			"\twaited     BIGINT NOT NULL DEFAULT 0\n" +
			") ENGINE=InnoDB")},
		// The clock is read once, for the token (VALUES(token) is now in
		// µs), which the expiry of the VALUES row reads too. Terse: every
		// byte travels with every attempt, the refusal and its mark too.
		acquire: acquire("VALUES($1,$2,LAST_INSERT_ID({now_us}),token DIV 1000+$3)"),
		// The acquisition of a turn's session: the same, once the server
		// grants it the turn, which it waits for a second at most.
		turnTake: acquire("SELECT $1,$2,LAST_INSERT_ID({now_us}),{now_ms}+$3 FROM DUAL WHERE GET_LOCK($4," + strconv.Itoa(turnTake) + ")=1"),
		// The owner first; the rest read whether it is now next's. The next
		// owner is never the releasing one, so changed rows are matched rows.
		// Freed for everyone, it leaves inLine or notInLine in
		// LAST_INSERT_ID ($2 is the key's turn, see turns.go), else the token.
		handover: fill("UPDATE {table} SET owner=IF(waited>{now_ms},NULL,$1)," +
			"token=IF(owner IS NULL,token+0*LAST_INSERT_ID(1+(IS_USED_LOCK($2)IS NOT NULL)),LAST_INSERT_ID(GREATEST(token+1,{now_us})))," +
			"expires_at=IF(owner IS NULL,0,{now_ms}+$3)" +
			" WHERE `key`=$4 AND owner=$5 AND expires_at>{now_ms}"),
		hasWaited: fill("SELECT waited FROM {table} WHERE 1 = 0"),
		addWaited: fill("ALTER TABLE {table} ADD COLUMN waited BIGINT NOT NULL DEFAULT 0"),
		renew:     fill("UPDATE {table} SET expires_at = LAST_INSERT_ID({now_ms} + $1) WHERE `key` = $2 AND owner = $3 AND expires_at > {now_ms}"),
		// LAST_INSERT_ID says whether a session holds the key's turn, $1
		// (turns.go): inLine, someone of another Locker waits, or notInLine.
		release: fill("UPDATE {table} SET expires_at=0*LAST_INSERT_ID(1+(IS_USED_LOCK($1)IS NOT NULL))" +
			" WHERE `key`=$2 AND owner=$3 AND expires_at>{now_ms}"),
		// The release and the hand-over of a lock taken under its key's turn,
		// run on the session that holds the turn: they give the turn back as
		// they free the lock, once the row is locked and before commit, and
		// say as release does whether the server then granted it to someone
		// (it does so at once).
		turnRelease: fill("UPDATE {table} SET expires_at=0*IFNULL(RELEASE_LOCK($1),0)*LAST_INSERT_ID(1+(IS_USED_LOCK($2)IS NOT NULL))" +
			" WHERE `key`=$3 AND owner=$4 AND expires_at>{now_ms}"),
		turnHandover: fill("UPDATE {table} SET owner=IF(waited>{now_ms},NULL,$1)," +
			"token=IF(owner IS NULL,token+0*IFNULL(RELEASE_LOCK($2),0)*LAST_INSERT_ID(1+(IS_USED_LOCK($3)IS NOT NULL)),LAST_INSERT_ID(GREATEST(token+1,{now_us})))," +
			"expires_at=IF(owner IS NULL,0,{now_ms}+$4)" +
			" WHERE `key`=$5 AND owner=$6 AND expires_at>{now_ms}"),
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
