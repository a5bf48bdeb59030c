package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/sqlconn"
)

var _ idem.Inspector = (*Store)(nil)

// Statements of Lookup and Forget. Ages and times left are computed by the
// database, on its clock; only rows alive (expires_ms >= now) count, as for
// Claim.
const (
	inspectSQL = `SELECT state, fingerprint, result, {now_ms} - created_ms, expires_ms - {now_ms} FROM {t}
WHERE idem_key = $1 AND expires_ms >= {now_ms}`
	forgetDoneSQL = `DELETE FROM {t} WHERE idem_key = $1 AND expires_ms >= {now_ms} AND state = 2`
	forgetAnySQL  = `DELETE FROM {t} WHERE idem_key = $1 AND expires_ms >= {now_ms}`
)

// Lookup implements idem.Inspector with one SELECT; it knows everything a
// Record holds.
func (s *Store) Lookup(ctx context.Context, key string) (idem.Record, error) {
	if err := idem.CheckKey(key); err != nil {
		return idem.Record{}, err
	}
	var (
		state       int
		fp, result  []byte
		age, remain int64
	)
	err := s.db.QueryRow(ctx, s.inspectQuery(inspectSQL), key).Scan(&state, &fp, &result, &age, &remain)
	at := time.Now()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return idem.Record{}, idem.ErrNotFound
	case err != nil:
		return idem.Record{}, err
	}
	r := idem.Record{
		Fingerprint: string(fp),
		Created:     at.Add(-time.Duration(age) * time.Millisecond),
		Expires:     at.Add(time.Duration(remain) * time.Millisecond),
	}
	switch state {
	case 1:
		r.State = idem.InProgress
	case 2:
		r.State, r.Result = idem.Done, result
		if r.Result == nil {
			r.Result = []byte{}
		}
	default:
		return idem.Record{}, fmt.Errorf("sqlstore: row for key has unknown state %d", state)
	}
	return r, nil
}

// Forget implements idem.Inspector with one DELETE, whose condition decides:
// unforced, it deletes only an outcome. When it deletes nothing, a SELECT
// tells a claim in progress from no record.
func (s *Store) Forget(ctx context.Context, key string, force bool) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	q := s.inspectQuery(forgetDoneSQL)
	if force {
		q = s.inspectQuery(forgetAnySQL)
	}
	// A claim recorded between the DELETE and the SELECT is an outcome the
	// next DELETE may take; a few rounds settle it.
	for range 3 {
		if n, err := sqlconn.Affected(s.db.Exec(ctx, q, key)); err != nil || n == 1 {
			return err
		}
		r, err := s.Lookup(ctx, key)
		if err != nil {
			return err // ErrNotFound included
		}
		if r.State == idem.InProgress {
			return &idem.InProgressError{RetryAfter: max(time.Until(r.Expires), 0)}
		}
	}
	return errors.New("sqlstore: forget kept racing with new outcomes; giving up")
}

// inspectQuery fills in one of the statements above.
func (s *Store) inspectQuery(q string) string {
	return s.dialect.Fill(q, "{tt}", s.tokens, "{t}", s.table, "{x}", indexSuffix)
}
