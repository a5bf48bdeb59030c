package bloomfilter

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
)

// Prefilter is a dedup.Store that puts the filter in front of an exact
// store. Every Claim records the id in the filter (TestAndAdd) and then asks
// the exact store, which alone decides: a hit is checked there, so a false
// positive costs one exact lookup and never a message; and a miss, which
// proves the id new, is still claimed there, because the claim is what makes
// a concurrent copy (which the filter answers "maybe") wait, and what a later
// duplicate is confirmed against. Done and Release go to the exact store
// only. A filter error does not block a message: the exact store answers
// and the error is counted.
//
// It is exactly as safe as the exact store, and it saves no exact round trip
// and no exact memory with any dedup.Store, ours included: their Claim
// checks and writes in one step, and the write cannot be skipped. It costs
// one more Redis round trip per message (per batch with ClaimBatch) and the
// filter's memory. What it gives is the counts in [PrefilterStats]: how
// often the filter was right, and the false-positive rate observed on real
// traffic, which tells whether a Lossy filter of this size would be
// acceptable for a flow before any message is entrusted to it.
type Prefilter struct {
	f     *Filter
	exact dedup.Store

	misses, hits, falseHits, lostMisses, errs atomic.Int64
}

var (
	_ dedup.Store        = (*Prefilter)(nil)
	_ dedup.BatchClaimer = (*Prefilter)(nil)
)

// NewPrefilter returns the prefilter of f in front of exact. A nil f or
// exact makes every call fail with dedup.ErrInvalid.
func NewPrefilter(f *Filter, exact dedup.Store) *Prefilter {
	return &Prefilter{f: f, exact: exact}
}

// PrefilterStats counts what a Prefilter saw since it was made.
type PrefilterStats struct {
	// Misses: the filter proved the id new.
	Misses int64
	// Hits: the filter reported the id maybe seen.
	Hits int64
	// FalseHits: hits the exact store answered Claimed: false positives,
	// redeliveries of messages whose handler failed (the filter recorded
	// the id at the first claim), or ids the exact store had forgotten
	// (past its retention) while the filter still held them. With few
	// handler failures, FalseHits / (FalseHits + Misses) estimates the
	// false-positive rate a Lossy store of the same size would drop.
	FalseHits int64
	// LostMisses: misses the exact store answered Done: the filter had
	// lost ids it held (a Redis restart or flush, or the filter's window is
	// shorter than the exact retention).
	LostMisses int64
	// Errors: filter calls that failed; the exact store answered anyway.
	Errors int64
}

// Stats returns the counts so far.
func (p *Prefilter) Stats() PrefilterStats {
	return PrefilterStats{
		Misses: p.misses.Load(), Hits: p.hits.Load(), FalseHits: p.falseHits.Load(),
		LostMisses: p.lostMisses.Load(), Errors: p.errs.Load(),
	}
}

func (p *Prefilter) check(id string) error {
	if p == nil || p.f == nil || p.exact == nil {
		return errors.Join(dedup.ErrInvalid, errors.New("bloomfilter: nil filter or exact store"))
	}
	return dedup.CheckID(id)
}

// Claim implements dedup.Store: the filter's TestAndAdd, then the exact
// store's Claim, whose answer is returned. Errors are the exact store's
// (and dedup.ErrInvalidID or dedup.ErrInvalid, with nothing sent).
func (p *Prefilter) Claim(ctx context.Context, id string, ttl time.Duration) (dedup.Claim, error) {
	if err := p.check(id); err != nil {
		return dedup.Claim{}, err
	}
	seen, ferr := p.f.TestAndAdd(ctx, id)
	c, err := p.exact.Claim(ctx, id, ttl)
	if err != nil {
		return c, err
	}
	p.count(ferr, seen, c.State)
	return c, nil
}

// ClaimBatch implements dedup.BatchClaimer: one filter round trip per
// MaxChunk ids, then the exact store's ClaimBatch if it has one, or its
// Claim for each id in turn.
func (p *Prefilter) ClaimBatch(ctx context.Context, ids []string, ttl time.Duration) ([]dedup.Claim, error) {
	for _, id := range ids {
		if err := p.check(id); err != nil {
			return nil, err
		}
	}
	if len(ids) == 0 {
		return []dedup.Claim{}, nil
	}
	seen, ferr := p.f.TestAndAddBatch(ctx, ids)
	var out []dedup.Claim
	if b, ok := p.exact.(dedup.BatchClaimer); ok {
		var err error
		if out, err = b.ClaimBatch(ctx, ids, ttl); err != nil {
			return nil, err
		}
	} else {
		out = make([]dedup.Claim, len(ids))
		for i, id := range ids {
			c, err := p.exact.Claim(ctx, id, ttl)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
	}
	for i, c := range out {
		p.count(ferr, ferr == nil && seen[i], c.State)
	}
	return out, nil
}

func (p *Prefilter) count(ferr error, seen bool, s dedup.State) {
	switch {
	case ferr != nil:
		p.errs.Add(1)
	case seen:
		p.hits.Add(1)
		if s == dedup.Claimed {
			p.falseHits.Add(1)
		}
	default:
		p.misses.Add(1)
		if s == dedup.Done {
			p.lostMisses.Add(1)
		}
	}
}

// Done implements dedup.Store on the exact store.
func (p *Prefilter) Done(ctx context.Context, id, token string, retention time.Duration) error {
	if err := p.check(id); err != nil {
		return err
	}
	return p.exact.Done(ctx, id, token, retention)
}

// Release implements dedup.Store on the exact store.
func (p *Prefilter) Release(ctx context.Context, id, token string) error {
	if err := p.check(id); err != nil {
		return err
	}
	return p.exact.Release(ctx, id, token)
}
