// Package redisstore is an idem.Store and idem.TokenStore on Redis (go-redis
// v9): a single server, a Sentinel-managed one, or a Cluster.
//
// A claim is one round trip (one Lua script that reads the record and, when
// it is absent, writes the claim with a PEXPIRE at the in-progress deadline),
// and so is a replay (the same script returns the outcome). Concurrent calls
// of one Store share round trips: they are coalesced into pipelines (see
// WithBatching). Deadlines are on
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
	"github.com/latchkey-go/latchkey/internal/redisbatch"
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
	Pipeline() redis.Pipeliner
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
	c        Client
	prefix   string
	batching bool
	exec     redisbatch.Runner
}

// An Option configures New.
type Option func(*Store)

// WithPrefix sets the prefix of every key the store writes. Default: "idem:"
// ([DefaultPrefix]). Stores with different prefixes never see each other's
// keys.
func WithPrefix(p string) Option {
	return func(s *Store) { s.prefix = p }
}

// WithBatching turns on or off the coalescing of the concurrent calls of one
// Store into pipelines: calls that arrive while others are in flight leave
// together, in one round trip, and calls on one key reach Redis in the order
// they were made. A call made alone is still sent at once, on its own.
// Default: on. Off sends every call on its own.
func WithBatching(on bool) Option {
	return func(s *Store) { s.batching = on }
}

// New returns a store on c. A nil c makes every call fail with idem.ErrInvalid.
func New(c Client, opts ...Option) *Store {
	s := &Store{c: c, prefix: DefaultPrefix, batching: true}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if c != nil {
		if s.batching {
			s.exec = redisbatch.New(c)
		} else {
			s.exec = redisbatch.Direct{C: c}
		}
	}
	return s
}

// RecordKey returns the Redis key that holds key's record.
func (s *Store) RecordKey(key string) string { return s.prefix + "{" + key + "}" }

// tokenKey returns the Redis key that holds a submit token.
func (s *Store) tokenKey(tok string) string { return s.prefix + "token:{" + tok + "}" }

func (s *Store) check() error {
	if s == nil || s.c == nil || s.exec == nil {
		return fmt.Errorf("%w: nil Redis client", idem.ErrInvalid)
	}
	return nil
}

func ms(d time.Duration) int64 { return max(1, int64((d+time.Millisecond-1)/time.Millisecond)) }

// abandonTimeout bounds the release of a claim whose caller gave up.
const abandonTimeout = time.Second

// abandon releases, in the background, a claim whose caller's context ended
// before the reply: the claim may still have reached Redis (a queued call is
// sent anyway, a sent one may have run), and would then block the key until
// its in-progress deadline. The release matches the claim's token, so it
// deletes nothing else; with batching it is sent after the claim (calls on
// one key keep their order). The goroutine ends within abandonTimeout.
func (s *Store) abandon(key, tok string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
		defer cancel()
		_ = s.exec.Run(ctx, nil, releaseScript, []string{s.RecordKey(key)}, tok).Err()
	}()
}

// Claim implements idem.Store in one round trip. When ctx ends before the
// reply, Claim returns ctx's error and releases the claim in the background
// in case it was taken.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, d time.Duration) (idem.Claim, error) {
	if err := s.check(); err != nil {
		return idem.Claim{}, err
	}
	tok := idem.NewToken()
	v, err := s.exec.Run(ctx, nil, claimScript, []string{s.RecordKey(key)}, tok, fingerprint, ms(d)).Slice()
	if err != nil {
		if ctx.Err() != nil {
			s.abandon(key, tok)
		}
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
	n, err := s.exec.Run(ctx, nil, recordScript, []string{s.RecordKey(key)}, token, result, ms(retention)).Int64()
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
	n, err := s.exec.Run(ctx, nil, releaseScript, []string{s.RecordKey(key)}, token).Int64()
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
	return s.exec.Run(ctx, nil, putTokenScript, []string{s.tokenKey(token)}, bind, strconv.FormatInt(ms(ttl), 10)).Err()
}

// ConsumeToken implements idem.TokenStore with GETDEL, one atomic step.
func (s *Store) ConsumeToken(ctx context.Context, token, bind string) error {
	if err := s.check(); err != nil {
		return err
	}
	got, err := s.exec.Run(ctx, nil, consumeTokenScript, []string{s.tokenKey(token)}).Text()
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
