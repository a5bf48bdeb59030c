package outbox

import (
	"context"
	"time"
)

// SetAfterPublish makes r call f between a round's publishing and its mark,
// with the number of messages published.
func SetAfterPublish(r *Relay, f func(published int)) { r.afterPublish = f }

// MarkPending marks every pending message published under token.
func MarkPending(ctx context.Context, o *Outbox, token uint64, leader string) (int, error) {
	batch, err := o.pending(ctx, 10000, nil, nil)
	if err != nil {
		return 0, err
	}
	ids := make([]int64, len(batch))
	for i, p := range batch {
		ids[i] = p.rowID
	}
	return len(ids), o.mark(ctx, token, leader, ids)
}

// Purge is the relay's purge under token.
func Purge(ctx context.Context, o *Outbox, token uint64, leader string, retention time.Duration) (int64, error) {
	return o.purge(ctx, token, leader, retention)
}
