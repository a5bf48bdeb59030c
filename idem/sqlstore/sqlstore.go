// Package sqlstore is an idem.Store and idem.TokenStore on a SQL database
// through database/sql: PostgreSQL (pgx's stdlib driver), SQLite
// (modernc.org/sqlite), and MySQL 8.0 or MariaDB 10.6 and later
// (github.com/go-sql-driver/mysql).
//
// Every key is a row; its primary key is the unique index that makes a claim
// one atomic INSERT ... ON CONFLICT DO UPDATE ... WHERE expired ... RETURNING.
// The same statement takes over a claim whose in-progress deadline has passed,
// so "expired" is judged once, by the database's clock, under the row's lock.
// On PostgreSQL the same statement also reads the row that stopped a claim,
// so a replay is one round trip; on SQLite and MySQL it is that statement
// plus one SELECT. Tokens are consumed with one
// DELETE ... RETURNING.
//
// On MySQL the claim is one INSERT ... ON DUPLICATE KEY UPDATE that tells
// whether it claimed through LAST_INSERT_ID (one round trip, plus the SELECT
// when the key is taken, as elsewhere), and a token is spent by one UPDATE
// that marks its row spent for Purge to delete. Neither depends on the
// client's clientFoundRows setting. Open the *sql.DB with
// interpolateParams=true, or each statement costs a preparation round trip
// too (idem/idemurl's mysql:// sets it).
//
// On pgx without database/sql, NewPgx takes a *pgxpool.Pool: the PostgreSQL
// statements, one round trip each, as through database/sql.
//
// Call Migrate once at start-up (it is idempotent), and Purge now and then to
// delete expired rows; expired rows are ignored whether purged or not.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/sqldialect"
)

var (
	_ idem.Store      = (*Store)(nil)
	_ idem.TokenStore = (*Store)(nil)
)

// Default table names.
const (
	DefaultTable      = "idem_records"
	DefaultTokenTable = "idem_tokens"
)

// Store keeps idempotency records and submit tokens in two tables. It is safe
// for concurrent use.
type Store struct {
	db      sqlconn.DB
	dialect Dialect
	table   string
	tokens  string
	q       queries
}

type queries struct {
	claim, lookup, record, release, purge, putToken, consumeToken, purgeTokens string
	migrations                                                                 []string
}

// An Option configures New.
type Option func(*Store)

// WithDialect sets the SQL dialect. Default: Detect, from the driver's type.
func WithDialect(d Dialect) Option { return func(s *Store) { s.dialect = d } }

// WithTable sets the records table. Default: "idem_records" ([DefaultTable]).
// It must be a plain identifier: letters, digits and underscores, not
// starting with a digit, and at most 55 bytes, so that its index,
// <table>_expires, fits the 63 bytes of an identifier too.
func WithTable(name string) Option { return func(s *Store) { s.table = name } }

// WithTokenTable sets the submit tokens table. Default: "idem_tokens"
// ([DefaultTokenTable]); the same rules as WithTable.
func WithTokenTable(name string) Option { return func(s *Store) { s.tokens = name } }

// New returns a store on db. It fails when db is nil, a table name is not a
// plain identifier, or the dialect cannot be detected. It does not touch the
// database; call Migrate to create the tables.
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", idem.ErrInvalid)
	}
	return newStore(sqlconn.StdDB(db), opts, func(d Dialect) (Dialect, error) { return sqldialect.Resolve(d, db) })
}

// newStore is New on db, whose dialect resolve settles from the one
// WithDialect gave.
func newStore(db sqlconn.DB, opts []Option, resolve func(Dialect) (Dialect, error)) (*Store, error) {
	s := &Store{db: db, table: DefaultTable, tokens: DefaultTokenTable}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if err := errors.Join(sqldialect.Ident("table", s.table, indexSuffix), sqldialect.Ident("token table", s.tokens, indexSuffix)); err != nil {
		return nil, fmt.Errorf("%w: sqlstore: %w", idem.ErrInvalid, err)
	}
	if s.table == s.tokens {
		return nil, fmt.Errorf("%w: sqlstore: records and tokens need two tables", idem.ErrInvalid)
	}
	var err error
	if s.dialect, err = resolve(s.dialect); err != nil {
		return nil, fmt.Errorf("%w: sqlstore: %w; use WithDialect", idem.ErrInvalid, err)
	}
	fill := func(q string) string { return s.dialect.Fill(q, "{tt}", s.tokens, "{t}", s.table, "{x}", indexSuffix) }
	s.q = queries{
		claim:        fill(claimSQL),
		lookup:       fill(lookupSQL),
		record:       fill(recordSQL),
		release:      fill(releaseSQL),
		purge:        fill(purgeSQL),
		putToken:     fill(putTokenSQL),
		consumeToken: fill(consumeTokenSQL),
		purgeTokens:  fill(purgeTokensSQL),
	}
	migs := migrations
	if s.dialect == Postgres {
		s.q.claim = fill(postgresClaimSQL)
	}
	if s.dialect == MySQL {
		s.q.claim, s.q.consumeToken = fill(mysqlClaimSQL), fill(mysqlConsumeTokenSQL)
		migs = mysqlMigrations
	}
	for _, m := range migs {
		s.q.migrations = append(s.q.migrations, fill(m))
	}
	return s, nil
}

// Dialect reports the dialect in use.
func (s *Store) Dialect() Dialect { return s.dialect }

// Migrate creates the tables and indexes if they do not exist. It is
// idempotent and safe to run from many instances at once (on PostgreSQL it
// holds a transaction-scoped advisory lock while it runs). It fails with an
// error wrapping idem.ErrInvalid on a server older than latchkey supports.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.dialect.Migrate(ctx, s.db, "latchkey/idem/sqlstore:"+s.table, s.q.migrations, idem.ErrInvalid); err != nil {
		return fmt.Errorf("sqlstore: %w", err)
	}
	return nil
}

// Purge deletes expired records and tokens and reports how many rows went.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	var n int64
	for _, q := range []string{s.q.purge, s.q.purgeTokens} {
		r, err := s.db.Exec(ctx, q)
		if err != nil {
			return n, err
		}
		k, _ := r.RowsAffected()
		n += k
	}
	return n, nil
}

func ms(d time.Duration) int64 { return max(1, int64((d+time.Millisecond-1)/time.Millisecond)) }

// Claim implements idem.Store: one INSERT ... ON CONFLICT, which on
// PostgreSQL also reads the row that stopped it (one round trip whatever the
// answer); elsewhere one SELECT follows when the key is taken.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, d time.Duration) (idem.Claim, error) {
	// The row can vanish between the two statements (released or expired),
	// or commit after the one statement's snapshot; then the claim is simply
	// tried again.
	for range 8 {
		tok := idem.NewToken()
		var (
			claimed bool
			r       row
			found   bool
			err     error
		)
		if s.dialect == Postgres {
			claimed, r, found, err = s.claimPostgres(ctx, key, tok, fingerprint, d)
		} else if claimed, err = s.claim(ctx, key, tok, fingerprint, d); err == nil && !claimed {
			found, err = sqlconn.ScanOne(s.db.QueryRow(ctx, s.q.lookup, key), &r.state, &r.fp, &r.result, &r.left)
		}
		switch {
		case err != nil:
			return idem.Claim{}, err
		case claimed:
			return idem.Claim{State: idem.Claimed, Token: tok}, nil
		case found:
			return r.claim()
		}
	}
	return idem.Claim{}, errors.New("sqlstore: claim kept racing with releases; giving up")
}

// row is the live row that stopped a claim.
type row struct {
	state      int
	fp, result []byte
	left       int64 // ms
}

func (r row) claim() (idem.Claim, error) {
	switch r.state {
	case 1:
		return idem.Claim{State: idem.InProgress, Fingerprint: string(r.fp), RetryAfter: time.Duration(max(r.left, 0)) * time.Millisecond}, nil
	case 2:
		if r.result == nil {
			r.result = []byte{}
		}
		return idem.Claim{State: idem.Done, Fingerprint: string(r.fp), Result: r.result}, nil
	}
	return idem.Claim{}, fmt.Errorf("sqlstore: row for key has unknown state %d", r.state)
}

// claimPostgres runs postgresClaimSQL: claimed for tok, or the live row that
// stopped the claim (found), or neither (try again).
func (s *Store) claimPostgres(ctx context.Context, key, tok, fingerprint string, d time.Duration) (claimed bool, r row, found bool, err error) {
	var got sql.NullString
	found, err = sqlconn.ScanOne(s.db.QueryRow(ctx, s.q.claim, key, tok, []byte(fingerprint), ms(d)), &got, &r.state, &r.fp, &r.result, &r.left)
	switch {
	case err != nil || !found:
		return false, r, false, err
	case got.Valid && got.String != tok:
		return false, r, false, fmt.Errorf("sqlstore: claim returned a foreign token")
	case got.Valid:
		return true, r, false, nil
	}
	return false, r, true, nil
}

// claim runs the claim statement of SQLite or MySQL and reports whether it
// claimed key for tok.
func (s *Store) claim(ctx context.Context, key, tok, fingerprint string, d time.Duration) (bool, error) {
	args := []any{key, tok, []byte(fingerprint), ms(d)}
	if s.dialect == MySQL {
		id, err := sqlconn.LastID(s.db.Exec(ctx, s.q.claim, args...))
		return id == 1, err
	}
	var got string
	found, err := sqlconn.ScanOne(s.db.QueryRow(ctx, s.q.claim, args...), &got)
	if found && got != tok {
		return false, fmt.Errorf("sqlstore: claim returned a foreign token")
	}
	return found, err
}

// Record implements idem.Store with one UPDATE. A claim past its deadline
// that nobody took over is still recorded: its run was the only one.
func (s *Store) Record(ctx context.Context, key, token string, result []byte, retention time.Duration) error {
	if result == nil {
		result = []byte{}
	}
	// The row always changes (state 1 to 2), so the affected rows are the
	// matched rows on MySQL too.
	return s.one(s.db.Exec(ctx, s.q.record, result, ms(retention), key, token))
}

// Release implements idem.Store with one DELETE.
func (s *Store) Release(ctx context.Context, key, token string) error {
	return s.one(s.db.Exec(ctx, s.q.release, key, token))
}

func (s *Store) one(r sql.Result, err error) error {
	n, err := sqlconn.Affected(r, err)
	if err == nil && n != 1 {
		return idem.ErrClaimLost
	}
	return err
}

// PutToken implements idem.TokenStore.
func (s *Store) PutToken(ctx context.Context, token, bind string, ttl time.Duration) error {
	_, err := s.db.Exec(ctx, s.q.putToken, token, []byte(bind), ms(ttl))
	return err
}

// ConsumeToken implements idem.TokenStore with one DELETE ... RETURNING, or
// on MySQL one UPDATE that marks the token spent.
func (s *Store) ConsumeToken(ctx context.Context, token, bind string) error {
	if s.dialect == MySQL {
		ok, err := sqlconn.LastID(s.db.Exec(ctx, s.q.consumeToken, []byte(bind), token))
		if err == nil && ok != 1 {
			return idem.ErrTokenInvalid
		}
		return err
	}
	var (
		got  []byte
		left int64
	)
	found, err := sqlconn.ScanOne(s.db.QueryRow(ctx, s.q.consumeToken, token), &got, &left)
	if err != nil {
		return err
	}
	if !found || left < 0 || string(got) != bind {
		return idem.ErrTokenInvalid
	}
	return nil
}
