// Package redisstore is an idem.Store and idem.TokenStore on Redis (go-redis
// v9): a single server, a Sentinel-managed one, or a Cluster.
//
// A claim is one round trip (one Lua script that reads the record and, when
// it is absent, writes the claim with a PEXPIRE at the in-progress deadline),
// and so is a replay (the same script returns the outcome). Deadlines are on
// Redis's clock. Every record is one Redis key of the form
// prefix + "{" + key + "}": the braces are a hash tag, so the scripts run on
// Cluster too.
//
// Redis keeps outcomes in memory and, depending on persistence, may lose them
// on a restart or failover; for money, put a SQL store behind it with the
// layered package.
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
)

var (
	//go:embed claim.lua
	claimLua string
	//go:embed record.lua
	recordLua string
	//go:embed release.lua
	releaseLua string
	//go:embed put_token.lua
	putTokenLua string
	//go:embed consume_token.lua
	consumeTokenLua string

	claimScript        = redis.NewScript(claimLua)
	recordScript       = redis.NewScript(recordLua)
	releaseScript      = redis.NewScript(releaseLua)
	putTokenScript     = redis.NewScript(putTokenLua)
	consumeTokenScript = redis.NewScript(consumeTokenLua)
)

// Client is the part of a go-redis client the store uses; *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all fit.
type Client interface {
	redis.Scripter
}

var (
	_ Client          = (*redis.Client)(nil)
	_ Client          = (*redis.ClusterClient)(nil)
	_ Client          = (redis.UniversalClient)(nil)
	_ idem.Store      = (*Store)(nil)
	_ idem.TokenStore = (*Store)(nil)
)

// DefaultPrefix starts every key the store writes unless WithPrefix says
// otherwise.
const DefaultPrefix = "idem:"

// Store keeps idempotency records and submit tokens in Redis. It is safe for
// concurrent use.
type Store struct {
	c      Client
	prefix string
}

// An Option configures New.
type Option func(*Store)

// WithPrefix sets the prefix of every key the store writes. Default: "idem:"
// ([DefaultPrefix]). Stores with different prefixes never see each other's
// keys.
func WithPrefix(p string) Option {
	return func(s *Store) { s.prefix = p }
}

// New returns a store on c. A nil c makes every call fail with idem.ErrInvalid.
func New(c Client, opts ...Option) *Store {
	s := &Store{c: c, prefix: DefaultPrefix}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s
}

// RecordKey returns the Redis key that holds key's record.
func (s *Store) RecordKey(key string) string { return s.prefix + "{" + key + "}" }

// tokenKey returns the Redis key that holds a submit token.
func (s *Store) tokenKey(tok string) string { return s.prefix + "token:{" + tok + "}" }

func (s *Store) check() error {
	if s == nil || s.c == nil {
		return fmt.Errorf("%w: nil Redis client", idem.ErrInvalid)
	}
	return nil
}

func ms(d time.Duration) int64 { return max(1, int64((d+time.Millisecond-1)/time.Millisecond)) }

// Claim implements idem.Store in one round trip.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, d time.Duration) (idem.Claim, error) {
	if err := s.check(); err != nil {
		return idem.Claim{}, err
	}
	tok := idem.NewToken()
	v, err := claimScript.Run(ctx, s.c, []string{s.RecordKey(key)}, tok, fingerprint, ms(d)).Slice()
	if err != nil {
		return idem.Claim{}, err
	}
	if len(v) == 0 {
		return idem.Claim{}, errors.New("redisstore: empty reply from claim script")
	}
	state, _ := v[0].(int64)
	switch {
	case state == 1:
		return idem.Claim{State: idem.Claimed, Token: tok}, nil
	case state == 2 && len(v) == 3:
		fp, _ := v[1].(string)
		pttl, _ := v[2].(int64)
		return idem.Claim{State: idem.InProgress, Fingerprint: fp, RetryAfter: time.Duration(max(pttl, 0)) * time.Millisecond}, nil
	case state == 3 && len(v) == 3:
		fp, _ := v[1].(string)
		res, _ := v[2].(string)
		return idem.Claim{State: idem.Done, Fingerprint: fp, Result: []byte(res)}, nil
	}
	return idem.Claim{}, fmt.Errorf("redisstore: unexpected reply %v from claim script", v)
}

// Record implements idem.Store in one round trip. A claim past its deadline is
// gone from Redis, so recording it fails with idem.ErrClaimLost.
func (s *Store) Record(ctx context.Context, key, token string, result []byte, retention time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	n, err := recordScript.Run(ctx, s.c, []string{s.RecordKey(key)}, token, result, ms(retention)).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return idem.ErrClaimLost
	}
	return nil
}

// Release implements idem.Store in one round trip.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := s.check(); err != nil {
		return err
	}
	n, err := releaseScript.Run(ctx, s.c, []string{s.RecordKey(key)}, token).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return idem.ErrClaimLost
	}
	return nil
}

// PutToken implements idem.TokenStore.
func (s *Store) PutToken(ctx context.Context, token, bind string, ttl time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	return putTokenScript.Run(ctx, s.c, []string{s.tokenKey(token)}, bind, strconv.FormatInt(ms(ttl), 10)).Err()
}

// ConsumeToken implements idem.TokenStore with GETDEL, one atomic step.
func (s *Store) ConsumeToken(ctx context.Context, token, bind string) error {
	if err := s.check(); err != nil {
		return err
	}
	got, err := consumeTokenScript.Run(ctx, s.c, []string{s.tokenKey(token)}).Text()
	if errors.Is(err, redis.Nil) {
		return idem.ErrTokenInvalid
	}
	if err != nil {
		return err
	}
	if got != bind {
		return idem.ErrTokenInvalid
	}
	return nil
}
