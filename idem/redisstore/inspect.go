package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
)

var (
	//go:embed lookup.lua
	lookupLua string
	//go:embed forget.lua
	forgetLua string

	lookupScript = redis.NewScript(lookupLua)
	forgetScript = redis.NewScript(forgetLua)
)

var _ idem.Inspector = (*Store)(nil)

// Lookup implements idem.Inspector in one round trip. Redis does not keep
// when a key was claimed, so Record.Created is always the zero Time.
// Records in the hash layout of earlier versions are read too.
func (s *Store) Lookup(ctx context.Context, key string) (idem.Record, error) {
	if err := idem.CheckKey(key); err != nil {
		return idem.Record{}, err
	}
	if err := s.check(); err != nil {
		return idem.Record{}, err
	}
	rk := s.RecordKey(key)
	v, err := s.exec.Run(ctx, nil, lookupScript, []string{rk}).Slice()
	if err != nil {
		return idem.Record{}, err
	}
	at := time.Now()
	if len(v) == 0 {
		return idem.Record{}, idem.ErrNotFound
	}
	pttl, _ := v[len(v)-1].(int64)
	var c idem.Claim
	switch layout, _ := v[0].(string); {
	case layout == "s" && len(v) == 3:
		rec, _ := v[1].(string)
		c, err = decodeRecord(rk, rec)
	case layout == "h" && len(v) == 5:
		state, _ := v[1].(string)
		fp, _ := v[2].(string)
		res, _ := v[3].(string)
		c, err = hashRecord(rk, state, fp, res)
	default:
		err = fmt.Errorf("redisstore: unexpected reply %v from lookup script", v)
	}
	if err != nil {
		return idem.Record{}, err
	}
	r := idem.Record{State: c.State, Fingerprint: c.Fingerprint, Result: c.Result}
	if pttl > 0 {
		r.Expires = at.Add(time.Duration(pttl) * time.Millisecond)
	}
	return r, nil
}

// hashRecord reads a record in the hash layout of earlier versions.
func hashRecord(rk, state, fp, result string) (idem.Claim, error) {
	switch state {
	case "p":
		return idem.Claim{State: idem.InProgress, Fingerprint: fp}, nil
	case "d":
		return idem.Claim{State: idem.Done, Fingerprint: fp, Result: []byte(result)}, nil
	}
	return idem.Claim{}, fmt.Errorf("redisstore: record at %q is a hash without a state", rk)
}

// Forget implements idem.Inspector in one round trip: one script decides
// and deletes.
func (s *Store) Forget(ctx context.Context, key string, force bool) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	forced := "0"
	if force {
		forced = "1"
	}
	v, err := s.exec.Run(ctx, nil, forgetScript, []string{s.RecordKey(key)}, forced).Int64Slice()
	if err != nil {
		return err
	}
	switch {
	case len(v) == 1 && v[0] == 0:
		return idem.ErrNotFound
	case len(v) == 1 && v[0] == 1:
		return nil
	case len(v) == 2 && v[0] == 2:
		return &idem.InProgressError{RetryAfter: time.Duration(max(v[1], 0)) * time.Millisecond}
	}
	return fmt.Errorf("redisstore: unexpected reply %v from forget script", v)
}
