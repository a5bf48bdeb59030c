// Package memstore is an in-process idem.Store and idem.TokenStore. It suits
// tests and programs that run as one process; it forgets everything when the
// process exits, so it cannot stop a duplicate that reaches another instance.
package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/idem"
)

var (
	_ idem.Store      = (*Store)(nil)
	_ idem.TokenStore = (*Store)(nil)
	_ idem.Inspector  = (*Store)(nil)
)

// Store keeps records in a map. The zero value is not usable; call New.
// All methods are safe for concurrent use.
type Store struct {
	now func() time.Time

	mu     sync.Mutex         // guards the fields below
	recs   map[string]*record // by key
	tokens map[string]token   // by token
	ops    int                // operations since the last sweep
}

type record struct {
	done        bool
	token       string
	fingerprint string
	result      []byte
	expires     time.Time // in-progress deadline or end of retention
	created     time.Time // when the key was claimed
}

type token struct {
	bind    string
	expires time.Time
}

// An Option configures New.
type Option func(*Store)

// WithClock replaces time.Now, for tests that move time by hand. Default:
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Store) {
		if now != nil {
			s.now = now
		}
	}
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, recs: map[string]*record{}, tokens: map[string]token{}}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s
}

// Claim implements idem.Store.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, d time.Duration) (idem.Claim, error) {
	if err := ctx.Err(); err != nil {
		return idem.Claim{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweepLocked(now)
	if r, ok := s.recs[key]; ok && now.Before(r.expires) {
		if r.done {
			return idem.Claim{State: idem.Done, Fingerprint: r.fingerprint, Result: clone(r.result)}, nil
		}
		return idem.Claim{State: idem.InProgress, Fingerprint: r.fingerprint, RetryAfter: r.expires.Sub(now)}, nil
	}
	tok := idem.NewToken()
	s.recs[key] = &record{token: tok, fingerprint: fingerprint, expires: now.Add(d), created: now}
	return idem.Claim{State: idem.Claimed, Token: tok}, nil
}

// Record implements idem.Store. A claim whose deadline passed but that nobody
// took over can still be recorded.
func (s *Store) Record(ctx context.Context, key, tok string, result []byte, retention time.Duration) error {
	return s.finish(ctx, key, tok, func(r *record) {
		r.done, r.token, r.result, r.expires = true, "", clone(result), s.now().Add(retention)
	})
}

// Release implements idem.Store.
func (s *Store) Release(ctx context.Context, key, tok string) error {
	return s.finish(ctx, key, tok, func(*record) { delete(s.recs, key) })
}

// finish ends, with end, under the lock, the claim of key that tok holds,
// or returns idem.ErrClaimLost when tok holds none.
func (s *Store) finish(ctx context.Context, key, tok string, end func(*record)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[key]
	if !ok || r.done || r.token != tok {
		return idem.ErrClaimLost
	}
	end(r)
	return nil
}

// PutToken implements idem.TokenStore.
func (s *Store) PutToken(ctx context.Context, tok, bind string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.sweepLocked(now)
	s.tokens[tok] = token{bind: bind, expires: now.Add(ttl)}
	return nil
}

// ConsumeToken implements idem.TokenStore.
func (s *Store) ConsumeToken(ctx context.Context, tok, bind string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[tok]
	delete(s.tokens, tok)
	if !ok || !s.now().Before(t.expires) || t.bind != bind {
		return idem.ErrTokenInvalid
	}
	return nil
}

// Len reports how many unexpired records and tokens the store holds.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = 1 << 30
	s.sweepLocked(s.now())
	return len(s.recs) + len(s.tokens)
}

// sweepLocked drops expired entries every 1024 operations, so memory stays
// bounded by what is live without a background goroutine.
func (s *Store) sweepLocked(now time.Time) {
	s.ops++
	if s.ops < 1024 {
		return
	}
	s.ops = 0
	for k, r := range s.recs {
		if !now.Before(r.expires) {
			delete(s.recs, k)
		}
	}
	for k, t := range s.tokens {
		if !now.Before(t.expires) {
			delete(s.tokens, k)
		}
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return append([]byte{}, b...)
}
