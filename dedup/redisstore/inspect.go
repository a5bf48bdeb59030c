package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
)

var (
	//go:embed lookup.lua
	lookupLua string
	//go:embed forget.lua
	forgetLua string

	lookupScript = redis.NewScript(lookupLua)
	forgetScript = redis.NewScript(forgetLua)
)

var _ dedup.Inspector = (*Store)(nil)

// Lookup implements dedup.Inspector in one round trip. Redis does not keep
// when an id was marked done, so Mark.Marked is always the zero Time.
func (s *Store) Lookup(ctx context.Context, id string) (dedup.Mark, error) {
	if err := dedup.CheckID(id); err != nil {
		return dedup.Mark{}, err
	}
	if err := s.check(); err != nil {
		return dedup.Mark{}, err
	}
	v, err := lookupScript.Run(ctx, s.c, []string{s.RecordKey(id)}).Int64Slice()
	if err != nil {
		return dedup.Mark{}, err
	}
	at := time.Now()
	switch {
	case len(v) == 1 && v[0] == 0:
		return dedup.Mark{}, dedup.ErrNotFound
	case len(v) == 2 && (v[0] == 2 || v[0] == 3):
		m := dedup.Mark{State: dedup.InProgress}
		if v[0] == 3 {
			m.State = dedup.Done
		}
		if v[1] > 0 {
			m.Expires = at.Add(time.Duration(v[1]) * time.Millisecond)
		}
		return m, nil
	}
	return dedup.Mark{}, fmt.Errorf("dedup/redisstore: unexpected reply %v from lookup script", v)
}

// Forget implements dedup.Inspector in one round trip: one script decides
// and deletes.
func (s *Store) Forget(ctx context.Context, id string, force bool) error {
	if err := dedup.CheckID(id); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	forced := "0"
	if force {
		forced = "1"
	}
	v, err := forgetScript.Run(ctx, s.c, []string{s.RecordKey(id)}, forced).Int64Slice()
	if err != nil {
		return err
	}
	switch {
	case len(v) == 1 && v[0] == 0:
		return dedup.ErrNotFound
	case len(v) == 1 && v[0] == 1:
		return nil
	case len(v) == 2 && v[0] == 2:
		return &dedup.InProgressError{RetryAfter: time.Duration(max(v[1], 0)) * time.Millisecond}
	}
	return fmt.Errorf("dedup/redisstore: unexpected reply %v from forget script", v)
}
