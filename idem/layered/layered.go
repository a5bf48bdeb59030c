// Package layered composes two idem stores into a fast claim in front and an
// iron gate behind: a fast front store (Redis) that absorbs most duplicates in
// one round trip, and an authoritative back store (SQL, whose unique index is
// the last gate) that decides.
//
// A key is claimed in front first; an outcome the front already holds is
// replayed from the front alone. A fresh front claim is confirmed in the back,
// and the back's answer wins: if the front lost its data (FLUSHALL, restart
// without persistence, failover to a replica that had not caught up), the
// back still holds the claim or the outcome, so the duplicate is refused or
// replayed, never run. A claim the front calls in progress is also asked of
// the back, because the front can be wrong that way too: when its Record or
// Release failed (a Redis that has just come back), the front keeps a claim
// the back has already turned into an outcome or given up. The back then
// replays the outcome, or lets the retry run, at once rather than after the
// front's in-progress deadline; only a claim the back also holds is refused.
//
// When the front is unreachable the back is used alone: slower, equally
// correct. Outcomes are recorded in the back first, then in the front; an
// outcome found only in the back is copied to the front for the next replay.
//
// Round trips: a replay found in front costs one; a fresh claim, and a copy
// the front calls in progress, cost one in front and one in the back.
package layered

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/options"
)

var _ idem.Store = (*Store)(nil)

// DefaultBackfill is how long an outcome copied from the back to the front
// stays there, unless WithBackfill says otherwise.
const DefaultBackfill = time.Hour

// Store is a front store in front of a back store. It is safe for concurrent
// use if both stores are.
type Store struct {
	front, back idem.Store
	backfill    time.Duration
	onFront     func(error)
}

// An Option configures New.
type Option func(*Store)

// WithBackfill sets how long an outcome found only in the back is kept in the
// front. Default: 1 hour ([DefaultBackfill]); 0 turns copying off.
func WithBackfill(d time.Duration) Option {
	return func(s *Store) { s.backfill = max(d, 0) }
}

// WithFrontErrors receives the front store's errors, which the store survives
// by using the back alone. Default: ignored.
func WithFrontErrors(f func(error)) Option {
	return func(s *Store) {
		if f != nil {
			s.onFront = f
		}
	}
}

// New returns front in front of back. It panics if either is nil, as
// http.Handle does with a nil handler: a store missing its gate is a mistake
// in the program, refused where it is written rather than on every request.
func New(front, back idem.Store, opts ...Option) *Store {
	switch {
	case front == nil:
		panic("layered.New: nil front store")
	case back == nil:
		panic("layered.New: nil back store")
	}
	s := &Store{front: front, back: back, backfill: DefaultBackfill, onFront: func(error) {}}
	options.Apply(s, opts)
	return s
}

func (s *Store) check() error {
	if s == nil || s.front == nil || s.back == nil {
		return fmt.Errorf("%w: layered store not made by New", idem.ErrInvalid)
	}
	return nil
}

// Claim implements idem.Store.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, d time.Duration) (idem.Claim, error) {
	if err := s.check(); err != nil {
		return idem.Claim{}, err
	}
	var frontTok string
	fc, err := s.front.Claim(ctx, key, fingerprint, d)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return idem.Claim{}, ctx.Err()
		}
		s.onFront(fmt.Errorf("layered: front claim: %w", err))
	case fc.State == idem.Claimed:
		frontTok = fc.Token
	case fc.State == idem.InProgress:
		return s.confirmInProgress(ctx, key, fingerprint, d, fc)
	default:
		return fc, nil // the front holds the outcome
	}

	bc, err := s.back.Claim(ctx, key, fingerprint, d)
	if err != nil {
		s.dropFront(ctx, key, frontTok)
		return idem.Claim{}, err
	}
	switch bc.State {
	case idem.Claimed:
		bc.Token = joinTokens(frontTok, bc.Token)
		return bc, nil
	case idem.Done:
		// The front forgot an outcome the back kept. Copy it forward, unless
		// this request's fingerprint differs: the front claim carries this
		// request's fingerprint, and a copy under it would replay the outcome
		// to a different request.
		if frontTok != "" && s.backfill > 0 && bc.Fingerprint == fingerprint {
			if err := idem.Finish(ctx, func(c context.Context) error {
				return s.front.Record(c, key, frontTok, bc.Result, s.backfill)
			}); err != nil {
				s.onFront(fmt.Errorf("layered: front backfill: %w", err))
			}
		} else {
			s.dropFront(ctx, key, frontTok)
		}
		return bc, nil
	default:
		s.dropFront(ctx, key, frontTok)
		return bc, nil
	}
}

// confirmInProgress asks the back about a key the front calls in progress
// (fc). The back decides: it also holds the claim when the first request
// really runs (InProgress, refused), holds the outcome when only the front's
// Record failed (Done, replayed), and holds nothing when only the front's
// Release failed or its claim outlived the back's (Claimed: this request
// runs, in the back alone, since the front's claim is not ours to use). When
// the back cannot be reached, the front's word stands.
//
// The front is not repaired: its stale claim belongs to a token this request
// does not have, and it ends at its own in-progress deadline; until then each
// copy costs the one back lookup.
func (s *Store) confirmInProgress(ctx context.Context, key, fingerprint string, d time.Duration, fc idem.Claim) (idem.Claim, error) {
	bc, err := s.back.Claim(ctx, key, fingerprint, d)
	switch {
	case err != nil && ctx.Err() != nil:
		return idem.Claim{}, ctx.Err()
	case err != nil:
		return fc, nil
	case bc.State == idem.Claimed:
		bc.Token = joinTokens("", bc.Token)
	}
	return bc, nil
}

func (s *Store) dropFront(ctx context.Context, key, tok string) {
	if tok == "" {
		return
	}
	if err := idem.Finish(ctx, func(c context.Context) error { return s.front.Release(c, key, tok) }); err != nil {
		s.onFront(fmt.Errorf("layered: front release: %w", err))
	}
}

// Record implements idem.Store: the back first (it decides), then the front.
func (s *Store) Record(ctx context.Context, key, token string, result []byte, retention time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	ft, bt, ok := splitTokens(token)
	if !ok {
		return idem.ErrClaimLost
	}
	if err := s.back.Record(ctx, key, bt, result, retention); err != nil {
		s.dropFront(ctx, key, ft)
		return err
	}
	if ft != "" {
		if err := s.front.Record(ctx, key, ft, result, retention); err != nil {
			s.onFront(fmt.Errorf("layered: front record: %w", err))
		}
	}
	return nil
}

// Release implements idem.Store: the back first, then the front.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := s.check(); err != nil {
		return err
	}
	ft, bt, ok := splitTokens(token)
	if !ok {
		return idem.ErrClaimLost
	}
	err := s.back.Release(ctx, key, bt)
	s.dropFront(ctx, key, ft)
	return err
}

// joinTokens packs both stores' tokens: the front's length, a colon, the
// front's token, the back's token. An empty front token means the front was
// unavailable when the key was claimed.
func joinTokens(front, back string) string {
	return strconv.Itoa(len(front)) + ":" + front + back
}

func splitTokens(tok string) (front, back string, ok bool) {
	n, rest, found := strings.Cut(tok, ":")
	if !found {
		return "", "", false
	}
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 || l > len(rest) {
		return "", "", false
	}
	return rest[:l], rest[l:], true
}
