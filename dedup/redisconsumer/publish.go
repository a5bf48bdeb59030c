package redisconsumer

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
)

// Adder is the part of a go-redis client Publish uses.
type Adder interface {
	XAdd(ctx context.Context, a *redis.XAddArgs) *redis.StringCmd
}

var _ Adder = (*redis.Client)(nil)

// Publish appends m to stream as one entry: m.ID under the id field, m.Body
// under the body field (WithIDField and WithBodyField; other options are
// ignored) and each header as a field of its own. It returns the new entry's
// id. Publishing the same m again appends a copy with a new entry id and the
// same message id, which a Consumer behind a Deduper processes once.
//
// It fails with dedup.ErrInvalidID for an invalid m.ID and with
// dedup.ErrInvalid for a nil client, an empty stream, or a header named like
// the id or body field; nothing is sent then.
func Publish(ctx context.Context, c Adder, stream string, m dedup.Message, opts ...Option) (string, error) {
	cfg := newConfig(opts)
	switch {
	case cfg.Invalid != nil:
		return "", cfg.Invalid
	case c == nil || stream == "":
		return "", fmt.Errorf("%w: redisconsumer: nil client or empty stream", dedup.ErrInvalid)
	}
	if err := dedup.CheckID(m.ID); err != nil {
		return "", err
	}
	values := make([]any, 0, 4+2*len(m.Header))
	values = append(values, cfg.idField, m.ID, cfg.bodyField, m.Body)
	for k, v := range m.Header {
		if k == cfg.idField || k == cfg.bodyField {
			return "", fmt.Errorf("%w: redisconsumer: header %q collides with the id or body field", dedup.ErrInvalid, k)
		}
		values = append(values, k, v)
	}
	return c.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: values}).Result()
}
