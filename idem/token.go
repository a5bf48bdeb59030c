package idem

import (
	"context"
	"fmt"
	"time"
)

// DefaultTokenTTL is a reasonable lifetime for a form's submit token.
const DefaultTokenTTL = 30 * time.Minute

// TokenStore keeps one-time submit tokens, the classic guard against a form
// submitted twice. A token is issued when a form is shown and consumed by its
// submit; consuming is one atomic step, so of two submits of one form exactly
// one succeeds.
type TokenStore interface {
	// PutToken stores token, bound to bind, for ttl.
	PutToken(ctx context.Context, token, bind string, ttl time.Duration) error
	// ConsumeToken deletes token and succeeds only if it existed, had not
	// expired and was bound to bind; otherwise it returns ErrTokenInvalid. A
	// token presented with the wrong binding is consumed all the same.
	ConsumeToken(ctx context.Context, token, bind string) error
}

// IssueToken creates a random one-time token (128 bits from crypto/rand) bound
// to bind (for example the principal and the form's name; "" for none) and
// stores it for ttl.
func IssueToken(ctx context.Context, ts TokenStore, bind string, ttl time.Duration) (string, error) {
	if ts == nil {
		return "", fmt.Errorf("%w: nil token store", ErrInvalid)
	}
	if err := checkDuration("token TTL", ttl); err != nil {
		return "", err
	}
	tok := NewToken()
	if err := ts.PutToken(ctx, tok, bind, ttl); err != nil {
		return "", err
	}
	return tok, nil
}

// ConsumeToken spends token. It returns nil exactly once per issued token, and
// ErrTokenInvalid for a second submit, an unknown, expired or malformed token,
// or another binding.
func ConsumeToken(ctx context.Context, ts TokenStore, token, bind string) error {
	if ts == nil {
		return fmt.Errorf("%w: nil token store", ErrInvalid)
	}
	if !validToken(token) {
		return ErrTokenInvalid
	}
	return ts.ConsumeToken(ctx, token, bind)
}

// validToken accepts what NewToken makes: 32 lower-case hex digits.
func validToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
