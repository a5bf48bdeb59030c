package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
)

// pending is a pending message as the relay reads it: the row id it marks
// by, and the message.
type pending struct {
	rowID int64
	msg   Message
}

// pending reads up to limit pending messages in insertion order, leaving
// out the keys skipKeys and the unordered messages skipIDs.
func (o *Outbox) pending(ctx context.Context, limit int, skipKeys, skipIDs []string) ([]pending, error) {
	var out []pending
	q, args := o.pendingSQL(skipKeys, skipIDs, limit)
	err := sqlconn.Each(ctx, o.db, q, args, func(scan func(...any) error) error {
		var p pending
		var seq sql.NullInt64
		var headers string
		var created int64
		if err := scan(&p.rowID, &p.msg.ID, &p.msg.Topic, &p.msg.Key, &seq, &p.msg.Payload, &headers, &created); err != nil {
			return err
		}
		p.msg.Seq = seq.Int64
		p.msg.Created = time.UnixMilli(created)
		if err := json.Unmarshal([]byte(headers), &p.msg.Headers); err != nil {
			return fmt.Errorf("message %s: headers: %w", p.msg.ID, err)
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: read pending: %w", err)
	}
	return out, nil
}

// A fencedWrite is what a relay does under its term's token.
type fencedWrite func(ctx context.Context, tx sqlconn.Tx) error

// fenced runs write in one transaction that first raises the relay row's
// token to token, with leader as the leader's value. When the row holds a
// higher token, nothing is written and the error wraps ErrFenced. The row
// stays locked until the transaction ends, so a newer relay's write waits
// for this one to end and then raises the token over it.
func (o *Outbox) fenced(ctx context.Context, token uint64, leader string, write fencedWrite) error {
	if token > math.MaxInt64 {
		return fmt.Errorf("%w: token %d does not fit a BIGINT", ErrInvalid, token)
	}
	t := int64(token)
	return sqlconn.InTx(ctx, o.db, nil, func(tx sqlconn.Tx) error {
		n, err := sqlconn.Affected(tx.Exec(ctx, o.fenceQ, t, leader, t))
		if err != nil {
			return fmt.Errorf("outbox: fence: %w", err)
		}
		if n == 0 {
			return ErrFenced
		}
		return write(ctx, tx)
	})
}

// mark marks the rows as published, under token.
func (o *Outbox) mark(ctx context.Context, token uint64, leader string, rowIDs []int64) error {
	return o.fenced(ctx, token, leader, func(ctx context.Context, tx sqlconn.Tx) error {
		for len(rowIDs) > 0 {
			n := min(len(rowIDs), 500)
			args := make([]any, n)
			for i, id := range rowIDs[:n] {
				args[i] = id
			}
			if _, err := tx.Exec(ctx, o.markSQL(n), args...); err != nil {
				return fmt.Errorf("outbox: mark: %w", err)
			}
			rowIDs = rowIDs[n:]
		}
		return nil
	})
}

// purge deletes the messages published longer ago than retention, under
// token, and reports how many went.
func (o *Outbox) purge(ctx context.Context, token uint64, leader string, retention time.Duration) (int64, error) {
	var n int64
	err := o.fenced(ctx, token, leader, func(ctx context.Context, tx sqlconn.Tx) error {
		var err error
		n, err = sqlconn.Affected(tx.Exec(ctx, o.purgeQ, retention.Milliseconds()))
		if err != nil {
			return fmt.Errorf("outbox: purge: %w", err)
		}
		return nil
	})
	return n, err
}

// Stats is the outbox as an operator sees it.
type Stats struct {
	// Pending is the number of committed messages not yet marked published.
	Pending int64
	// OldestPending is when the oldest pending message was added, by the
	// database's clock; the zero Time when none is pending.
	OldestPending time.Time
	// Lag is how long the oldest pending message has waited, by the
	// database's clock: 0 when none is pending.
	Lag time.Duration
	// Published is the number of published messages kept until the
	// retention passes.
	Published int64
	// Token is the highest term token a relay has marked or purged with, 0
	// if none has yet; Leader is that relay's value and LastWrite when it
	// wrote (the zero Time if never).
	Token     uint64
	Leader    string
	LastWrite time.Time
}

// Stats reads the outbox's state in three queries. Errors are the
// database's (a missing table included: run Migrate).
func (o *Outbox) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	var oldest, now, token, updated int64
	if err := o.db.QueryRow(ctx, o.sql(pendingStatsSQL)).Scan(&s.Pending, &oldest, &now); err != nil {
		return s, fmt.Errorf("outbox: stats: %w", err)
	}
	if s.Pending > 0 {
		s.OldestPending = time.UnixMilli(oldest)
		s.Lag = time.Duration(max(now-oldest, 0)) * time.Millisecond
	}
	if err := o.db.QueryRow(ctx, o.sql(publishedSQL)).Scan(&s.Published); err != nil {
		return s, fmt.Errorf("outbox: stats: %w", err)
	}
	if err := o.db.QueryRow(ctx, o.sql(relayStateSQL)).Scan(&token, &s.Leader, &updated); err != nil {
		return s, fmt.Errorf("outbox: stats: %w", err)
	}
	s.Token = uint64(max(token, 0))
	if updated > 0 {
		s.LastWrite = time.UnixMilli(updated)
	}
	return s, nil
}
