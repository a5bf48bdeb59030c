package bloomfilter

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
)

// Lossy is a dedup.Store on the filter alone: a processed id is remembered
// by its bits, about 11 bits at a 1% rate instead of a record per id, and
// any hit is answered Done. So a genuinely new message is dropped, its
// handler never run, with probability up to Sizing.Rate (1% at a 1% rate
// when both generations are full; less while they fill). Never use it where
// a message moves money or where losing one is not acceptable; put
// [Prefilter] or the exact store there.
//
// The rest of the cycle is exact: a message in processing holds a claim key
// (its token, with the processing TTL) under the filter's hash tag, so of
// concurrent copies exactly one is claimed and the others see InProgress; a
// handler failure releases the claim and a crash lets it expire, and in both
// cases the redelivery is processed, because the id's bits are set only when
// it is marked done. Done sets the bits and deletes the claim key in one
// step. A processed id is remembered for the filter's window (one to two
// periods), not for the retention given to Done.
type Lossy struct{ f *Filter }

var (
	_ dedup.Store        = (*Lossy)(nil)
	_ dedup.BatchClaimer = (*Lossy)(nil)
)

// NewLossy returns the lossy store on f. A nil f makes every call fail with
// dedup.ErrInvalid.
func NewLossy(f *Filter) *Lossy { return &Lossy{f: f} }

// Claim implements dedup.Store in one round trip: Done when the filter
// reports id seen (rightly, or wrongly with probability up to Sizing.Rate),
// otherwise Claimed or InProgress as the claim key decides.
func (l *Lossy) Claim(ctx context.Context, id string, ttl time.Duration) (dedup.Claim, error) {
	c, err := l.ClaimBatch(ctx, []string{id}, ttl)
	if err != nil {
		return dedup.Claim{}, err
	}
	return c[0], nil
}

// ClaimBatch implements dedup.BatchClaimer: Claim for every id in one round
// trip per MaxChunk ids. An id given twice is claimed by its first
// occurrence.
func (l *Lossy) ClaimBatch(ctx context.Context, ids []string, ttl time.Duration) ([]dedup.Claim, error) {
	if len(ids) == 0 {
		return []dedup.Claim{}, nil
	}
	toks := make([]string, len(ids))
	for i := range toks {
		toks[i] = rand.Text()
	}
	r, err := l.f.run(ctx, "claim", ids, toks, ttl)
	if err != nil {
		return nil, err
	}
	out := make([]dedup.Claim, len(ids))
	for i := range out {
		switch r[2*i] {
		case 1:
			out[i] = dedup.Claim{State: dedup.Claimed, Token: toks[i]}
		case 2:
			out[i] = dedup.Claim{State: dedup.InProgress, RetryAfter: time.Duration(max(r[2*i+1], 0)) * time.Millisecond}
		case 3:
			out[i] = dedup.Claim{State: dedup.Done}
		default:
			return nil, fmt.Errorf("bloomfilter: unexpected claim reply %d", r[2*i])
		}
	}
	return out, nil
}

// Done implements dedup.Store: it adds id to the filter and deletes the
// claim, in one round trip. retention is not used: the filter's window
// decides how long the id is remembered. It returns an error wrapping
// dedup.ErrClaimLost when token no longer owns the claim.
func (l *Lossy) Done(ctx context.Context, id, token string, retention time.Duration) error {
	return l.finish(ctx, "done", id, token)
}

// Release implements dedup.Store: it deletes the claim, in one round trip,
// leaving the filter unchanged so the redelivery is processed. It returns an
// error wrapping dedup.ErrClaimLost when token no longer owns the claim.
func (l *Lossy) Release(ctx context.Context, id, token string) error {
	return l.finish(ctx, "release", id, token)
}

func (l *Lossy) finish(ctx context.Context, mode, id, token string) error {
	r, err := l.f.run(ctx, mode, []string{id}, []string{token}, 0)
	if err != nil {
		return err
	}
	if r[0] != 1 {
		return fmt.Errorf("%w: bloomfilter: %s of %q", dedup.ErrClaimLost, mode, id)
	}
	return nil
}
