package dedup

import (
	"context"
	"errors"

	"github.com/latchkey-go/latchkey/idem"
)

// idemInspector is FromIdem's Store over an idem.Inspector: it inspects
// message ids as the idem store's records.
type idemInspector struct{ idemStore }

var _ Inspector = idemInspector{}

func (a idemInspector) Lookup(ctx context.Context, id string) (Mark, error) {
	if err := CheckID(id); err != nil {
		return Mark{}, err
	}
	r, err := a.s.(idem.Inspector).Lookup(ctx, id)
	if err != nil {
		return Mark{}, fromIdem(err)
	}
	m := Mark{State: InProgress, Expires: r.Expires}
	if r.State == idem.Done {
		m.State = Done
	}
	return m, nil
}

func (a idemInspector) Forget(ctx context.Context, id string, force bool) error {
	if err := CheckID(id); err != nil {
		return err
	}
	return fromIdem(a.s.(idem.Inspector).Forget(ctx, id, force))
}

// fromIdem turns idem's answers into dedup's: ErrNotFound and an
// *InProgressError keep their meaning.
func fromIdem(err error) error {
	var ip *idem.InProgressError
	switch {
	case errors.Is(err, idem.ErrNotFound):
		return ErrNotFound
	case errors.As(err, &ip):
		return &InProgressError{RetryAfter: ip.RetryAfter}
	}
	return err
}
