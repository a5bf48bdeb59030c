package layered

import (
	"context"
	"errors"
	"fmt"

	"github.com/latchkey-go/latchkey/idem"
)

var _ idem.Inspector = (*Store)(nil)

// inspectors returns both stores as idem.Inspectors, or an error wrapping
// idem.ErrInvalid naming the one that is not.
func (s *Store) inspectors() (front, back idem.Inspector, err error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	front, fok := s.front.(idem.Inspector)
	back, bok := s.back.(idem.Inspector)
	switch {
	case !bok:
		return nil, nil, fmt.Errorf("%w: layered: the back store %T cannot be inspected", idem.ErrInvalid, s.back)
	case !fok:
		return nil, nil, fmt.Errorf("%w: layered: the front store %T cannot be inspected", idem.ErrInvalid, s.front)
	}
	return front, back, nil
}

// Lookup implements idem.Inspector when both stores do (otherwise it fails
// with idem.ErrInvalid). The back decides, as for Claim: its record is
// returned when it has one. Only when it has none is the front asked, and
// a record found there alone is returned: an outcome the back has lost, or
// a claim whose Release reached the back but not the front (which a retry
// gets past, since the front's claims are confirmed in the back). An
// unreachable back is an error, not a reason to trust the front.
func (s *Store) Lookup(ctx context.Context, key string) (idem.Record, error) {
	if err := idem.CheckKey(key); err != nil {
		return idem.Record{}, err
	}
	front, back, err := s.inspectors()
	if err != nil {
		return idem.Record{}, err
	}
	r, err := back.Lookup(ctx, key)
	if !errors.Is(err, idem.ErrNotFound) {
		return r, err
	}
	return front.Lookup(ctx, key)
}

// Forget implements idem.Inspector when both stores do (otherwise it fails
// with idem.ErrInvalid): the back first, since it decides, then the front.
// A claim in progress in the back is refused unless force is true, and then
// the front is left alone too. Once the back holds nothing, the front's
// record is deleted whatever it is: a claim there alone cannot run a
// request twice, because the back confirms every claim the front grants.
// It returns idem.ErrNotFound when neither store had a record, and the
// front's error when it could not be reached: an outcome left in the front
// would still be replayed.
func (s *Store) Forget(ctx context.Context, key string, force bool) error {
	if err := idem.CheckKey(key); err != nil {
		return err
	}
	front, back, err := s.inspectors()
	if err != nil {
		return err
	}
	berr := back.Forget(ctx, key, force)
	if berr != nil && !errors.Is(berr, idem.ErrNotFound) {
		return berr
	}
	ferr := front.Forget(ctx, key, true)
	switch {
	case ferr == nil:
		return nil
	case !errors.Is(ferr, idem.ErrNotFound):
		return fmt.Errorf("layered: front: %w", ferr)
	}
	return berr // nil if the back had the record, else ErrNotFound
}
