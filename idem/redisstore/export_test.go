package redisstore

import (
	"context"
	"time"

	"github.com/latchkey-go/latchkey/idem"
)

// UseClaimScript makes s claim with the script it uses on servers before
// Redis 7.0, which refuse SET with both NX and GET.
func UseClaimScript(s *Store) { s.noSetGet.Store(true) }

// ClaimHashPath claims key through the path for a record in the hash layout
// of earlier versions, whatever the key holds.
func ClaimHashPath(ctx context.Context, s *Store, key, fingerprint string, d time.Duration) (idem.Claim, error) {
	tok := idem.NewToken()
	c, err := s.claimHash(ctx, s.RecordKey(key), claimPrefix(tok)+fingerprint, ms(d))
	if c.State == idem.Claimed {
		c.Token = tok
	}
	return c, err
}
