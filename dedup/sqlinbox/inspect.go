package sqlinbox

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
)

var (
	_ dedup.Inspector = (*Inbox)(nil)
	_ dedup.Inspector = (*PgxInbox)(nil)
)

const (
	inspectSQL = `SELECT {now_ms} - processed_ms FROM {t} WHERE msg_id = $1`
	forgetSQL  = `DELETE FROM {t} WHERE msg_id = $1`
)

// Lookup implements dedup.Inspector with one SELECT. The inbox holds only
// committed ids, so a mark is always Done: a message being processed is an
// uncommitted row no other transaction sees, and reads as ErrNotFound.
// Mark.Expires is the earliest Purge may delete the row (processed plus
// WithRetention); it stays until a Purge does.
func (in *Inbox) Lookup(ctx context.Context, id string) (dedup.Mark, error) {
	return in.lookup(ctx, id)
}

func (in *inbox) lookup(ctx context.Context, id string) (dedup.Mark, error) {
	if err := dedup.CheckID(id); err != nil {
		return dedup.Mark{}, err
	}
	var age int64
	err := in.db.QueryRow(ctx, in.sql(inspectSQL), id).Scan(&age)
	at := time.Now()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return dedup.Mark{}, dedup.ErrNotFound
	case err != nil:
		return dedup.Mark{}, err
	}
	marked := at.Add(-time.Duration(age) * time.Millisecond)
	return dedup.Mark{State: dedup.Done, Marked: marked, Expires: marked.Add(in.retention)}, nil
}

// Forget implements dedup.Inspector with one DELETE of the committed id;
// force changes nothing, since a message being processed holds no row the
// DELETE can see (it returns ErrNotFound for it). Forgetting an id lets the
// next copy of the message run its business writes again.
func (in *Inbox) Forget(ctx context.Context, id string, force bool) error {
	return in.forget(ctx, id)
}

func (in *inbox) forget(ctx context.Context, id string) error {
	if err := dedup.CheckID(id); err != nil {
		return err
	}
	r, err := in.db.Exec(ctx, in.sql(forgetSQL), id)
	if err != nil {
		return err
	}
	n, err := r.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return dedup.ErrNotFound
	}
	return nil
}
