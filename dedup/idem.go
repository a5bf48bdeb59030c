package dedup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/idem"
)

// FromIdem returns a Store on an idempotency store: the claim state machine
// is the same (claim with a deadline and a token, record with a retention,
// release, takeover after expiry), so every idem.Store (memstore,
// redisstore, sqlstore, layered) serves for messages too. Message ids are
// stored as idem keys with an empty fingerprint and an empty result; keep
// them in a key space (prefix or table) of their own so they never meet
// request keys. idem.ErrClaimLost is reported as an error matching both
// ErrClaimLost and idem.ErrClaimLost.
//
// When s is an idem.Inspector, so is the Store: a message id's mark can be
// looked up and forgotten.
//
// A dedicated backend is leaner: dedup/redisstore keeps one short string per id
// where redisstore keeps a hash, and claims a batch in one round trip.
func FromIdem(s idem.Store) Store {
	if _, ok := s.(idem.Inspector); ok {
		return idemInspector{idemStore{s}}
	}
	return idemStore{s}
}

type idemStore struct{ s idem.Store }

var _ Store = idemStore{}

func (a idemStore) Claim(ctx context.Context, id string, ttl time.Duration) (Claim, error) {
	if a.s == nil {
		return Claim{}, fmt.Errorf("%w: nil idem store", ErrInvalid)
	}
	c, err := a.s.Claim(ctx, id, "", ttl)
	if err != nil {
		return Claim{}, err
	}
	switch c.State {
	case idem.Claimed:
		return Claim{State: Claimed, Token: c.Token}, nil
	case idem.InProgress:
		return Claim{State: InProgress, RetryAfter: c.RetryAfter}, nil
	case idem.Done:
		return Claim{State: Done}, nil
	}
	return Claim{}, fmt.Errorf("dedup: idem store returned invalid claim state %d", c.State)
}

func (a idemStore) Done(ctx context.Context, id, token string, retention time.Duration) error {
	if a.s == nil {
		return fmt.Errorf("%w: nil idem store", ErrInvalid)
	}
	return claimLost(a.s.Record(ctx, id, token, []byte{}, retention))
}

func (a idemStore) Release(ctx context.Context, id, token string) error {
	if a.s == nil {
		return fmt.Errorf("%w: nil idem store", ErrInvalid)
	}
	return claimLost(a.s.Release(ctx, id, token))
}

func claimLost(err error) error {
	if errors.Is(err, idem.ErrClaimLost) {
		return fmt.Errorf("%w: %w", ErrClaimLost, err)
	}
	return err
}
