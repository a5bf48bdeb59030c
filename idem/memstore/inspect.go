package memstore

import (
	"context"

	"github.com/latchkey-go/latchkey/idem"
)

// Lookup implements idem.Inspector; it knows everything a Record holds.
func (s *Store) Lookup(ctx context.Context, key string) (idem.Record, error) {
	if err := idem.CheckKey(key); err != nil {
		return idem.Record{}, err
	}
	if err := ctx.Err(); err != nil {
		return idem.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	if !ok {
		return idem.Record{}, idem.ErrNotFound
	}
	rec := idem.Record{State: idem.InProgress, Fingerprint: r.fingerprint, Created: r.created, Expires: r.expires}
	if r.done {
		rec.State, rec.Result = idem.Done, clone(r.result)
	}
	return rec, nil
}

// Forget implements idem.Inspector.
func (s *Store) Forget(ctx context.Context, key string, force bool) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	if !ok {
		return idem.ErrNotFound
	}
	if !r.done && !force {
		return &idem.InProgressError{RetryAfter: r.expires.Sub(s.now())}
	}
	delete(s.recs, key)
	return nil
}

// live returns key's record if its deadline or retention has not ended.
func (s *Store) live(key string) (*record, bool) {
	r, ok := s.recs[key]
	if !ok || !s.now().Before(r.expires) {
		return nil, false
	}
	return r, true
}
