// Package redisstore is an idem.Store and idem.TokenStore on Redis (go-redis
// v9): a single server, a Sentinel-managed one, or a Cluster.
//
// A claim is one round trip, and so is a replay: one plain SET NX PX GET,
// which writes the claim, with the in-progress deadline as its expiry, only
// if the key has no record, and returns the record it found (a Lua script
// does the same on servers before Redis 7.0, which refuse NX with GET). A
// claim found in progress costs one more round trip, a PTTL, for the time
// left to its deadline. Recording the outcome and releasing the claim are one
// Lua script each, which act only if the caller's token still owns the
// claim. Concurrent calls of one Store share round trips: they are coalesced
// into pipelines (see WithBatching). Deadlines are on Redis's clock.
//
// Every record is one Redis string under prefix + "{" + key + "}" (the braces
// are a hash tag, so the scripts run on Cluster too): a claim is "p", the
// owner token (32 hex digits) and the request fingerprint; an outcome is "d",
// the fingerprint's length in decimal, ":", the fingerprint and the result.
// Earlier versions kept a record as a hash; a claim that finds one reads it
// with a script, so outcomes recorded before an upgrade still replay, and a
// claim is never written as a hash. During a rolling upgrade, an instance of
// an earlier version that meets a record written by this one fails the
// request (Redis answers WRONGTYPE) rather than run it again.
//
// Redis keeps outcomes in memory and, depending on persistence, may lose them
// on a restart or failover; for money, put a SQL store behind it with the
// layered package.
package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/internal/redisbatch"
)

var (
	//go:embed claim.lua
	claimLua string
	//go:embed claim_hash.lua
	claimHashLua string
	//go:embed record.lua
	recordLua string
	//go:embed release.lua
	releaseLua string
	//go:embed put_token.lua
	putTokenLua string
	//go:embed consume_token.lua
	consumeTokenLua string

	claimScript        = redis.NewScript(claimLua)
	claimHashScript    = redis.NewScript(claimHashLua)
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
	sends    int
	invalid  error // a bad option's
	exec     redisbatch.Runner
	noSetGet atomic.Bool // the server refused SET NX GET: claims use the script

	lastMillis atomic.Pointer[millis] // see boxedMillis
	lastRetain atomic.Pointer[millis] // the same for Record's retention
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

// WithSendsInFlight fixes, with batching on, how many commands or pipelines
// a Store has on their way to Redis at once; calls beyond them leave
// together in the next pipeline. It must be at least 1; a Store given less
// fails every call with idem.ErrInvalid. By default the number follows the
// load, as a Redis lock's does (see redislock.WithSendsInFlight): fewer,
// larger pipelines while round trips grow, more overlapping ones while they
// stay short and calls wait.
func WithSendsInFlight(n int) Option {
	return func(s *Store) {
		if n < 1 {
			s.invalid = fmt.Errorf("%w: redisstore: %d sends in flight, want at least 1", idem.ErrInvalid, n)
			return
		}
		s.sends = n
	}
}

// New returns a store on c. A nil c, or an invalid option, makes every call
// fail with idem.ErrInvalid.
func New(c Client, opts ...Option) *Store {
	s := &Store{c: c, prefix: DefaultPrefix, batching: true}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	if c != nil {
		s.exec = redisbatch.NewRunner(c, s.batching, s.sends)
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
	return s.invalid
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
		_ = s.exec.Run(ctx, nil, releaseScript, []string{s.RecordKey(key)}, claimPrefix(tok)).Err()
	}()
}

// newClaim returns a claim with a fresh owner token (as idem.NewToken makes
// them: 128 bits from crypto/rand, hex-encoded) for a request with
// fingerprint, built in one allocation: "p", the token, the fingerprint.
func newClaim(fingerprint string) string {
	var r [16]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand: "Read ... never returns an error")
	var h [claimPrefixLen - 1]byte
	hex.Encode(h[:], r[:])
	var b strings.Builder
	b.Grow(claimPrefixLen + len(fingerprint))
	b.WriteByte('p')
	b.Write(h[:])
	b.WriteString(fingerprint)
	return b.String()
}

// boxedMillis returns ms(d) as a command argument. The boxing of an int64
// allocates; last keeps the last one, as a program uses one or two
// durations (the store keeps one for claims, one for Record's retention).
func boxedMillis(last *atomic.Pointer[millis], d time.Duration) any {
	if p := last.Load(); p != nil && p.d == d {
		return p.v
	}
	m := &millis{d: d, v: ms(d)}
	last.Store(m)
	return m.v
}

// scriptArgs holds a script call's one key and its arguments in one
// allocation.
type scriptArgs struct {
	keys [1]string
	args [3]any
}

// millis is a duration and its boxed milliseconds (see boxedMillis).
type millis struct {
	d time.Duration
	v any
}

// claimPrefix is how a claim owned by token begins: "p" and the token.
func claimPrefix(token string) string { return "p" + token }

// claimPrefixLen is the length of a claim's prefix: the owner tokens Claim
// makes (idem.NewToken) are 32 hex digits.
const claimPrefixLen = 1 + 32

// ownerToken reports whether token can own a claim: it has the length of the
// tokens Claim makes, so that it cannot match the start of another one.
func ownerToken(token string) bool { return len(token) == claimPrefixLen-1 }

// Claim implements idem.Store in one round trip (two for a claim found in
// progress). When ctx ends before the reply, Claim returns ctx's error and
// releases the claim in the background in case it was taken.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, d time.Duration) (idem.Claim, error) {
	if err := s.check(); err != nil {
		return idem.Claim{}, err
	}
	if err := ctx.Err(); err != nil {
		// go-redis's cluster client does not always look at a context
		// already done before it sends: claim nothing.
		return idem.Claim{}, err
	}
	claim := newClaim(fingerprint)
	tok := claim[1:claimPrefixLen]
	rk := s.RecordKey(key)
	c, err := s.claim(ctx, rk, claim, boxedMillis(&s.lastMillis, d))
	if err != nil {
		if ctx.Err() != nil {
			s.abandon(key, tok)
		}
		return idem.Claim{}, err
	}
	if c.State == idem.Claimed {
		c.Token = tok
	}
	return c, nil
}

// claim writes the claim at rk unless a record is there, and reports what it
// found.
func (s *Store) claim(ctx context.Context, rk, claim string, deadline any) (idem.Claim, error) {
	var cmd *redis.Cmd
	if !s.noSetGet.Load() {
		cmd = s.exec.Do(ctx, rk, "set", rk, claim, "nx", "px", deadline, "get")
		if err := cmd.Err(); err != nil && err != redis.Nil && redis.HasErrorPrefix(err, "ERR syntax") {
			s.noSetGet.Store(true) // before Redis 7.0
			cmd = nil
		}
	}
	if cmd == nil {
		cmd = s.exec.Run(ctx, nil, claimScript, []string{rk}, claim, deadline)
	}
	v, err := cmd.Text()
	switch {
	case errors.Is(err, redis.Nil):
		return idem.Claim{State: idem.Claimed}, nil
	case err != nil && redis.HasErrorPrefix(err, "WRONGTYPE"):
		return s.claimHash(ctx, rk, claim, deadline)
	case err != nil:
		return idem.Claim{}, err
	}
	return s.found(ctx, rk, v)
}

// found decodes the record v found at rk; for a claim in progress it asks
// Redis for the time left to its deadline.
func (s *Store) found(ctx context.Context, rk, v string) (idem.Claim, error) {
	c, err := decodeRecord(rk, v)
	if err != nil || c.State != idem.InProgress {
		return c, err
	}
	pttl, err := s.exec.Do(ctx, rk, "pttl", rk).Int64()
	if err != nil {
		return idem.Claim{}, err
	}
	c.RetryAfter = time.Duration(max(pttl, 0)) * time.Millisecond
	return c, nil
}

// decodeRecord reads the record v at rk in today's layout (see the package
// doc), without the time left to a claim's deadline.
func decodeRecord(rk, v string) (idem.Claim, error) {
	switch {
	case strings.HasPrefix(v, "p") && len(v) >= claimPrefixLen:
		return idem.Claim{State: idem.InProgress, Fingerprint: v[claimPrefixLen:]}, nil
	case strings.HasPrefix(v, "d"):
		n, rest, ok := strings.Cut(v[1:], ":")
		fpLen, err := strconv.Atoi(n)
		if ok && err == nil && fpLen >= 0 && fpLen <= len(rest) {
			return idem.Claim{State: idem.Done, Fingerprint: rest[:fpLen], Result: []byte(rest[fpLen:])}, nil
		}
	}
	return idem.Claim{}, fmt.Errorf("redisstore: record at %q is not a claim or an outcome", rk)
}

// claimHash is claim for a key holding a record in the layout of earlier
// versions, a hash.
func (s *Store) claimHash(ctx context.Context, rk, claim string, deadline any) (idem.Claim, error) {
	v, err := s.exec.Run(ctx, nil, claimHashScript, []string{rk}, claim, deadline).Slice()
	if err != nil {
		return idem.Claim{}, err
	}
	state, _ := v[0].(int64)
	switch {
	case state == 1:
		return idem.Claim{State: idem.Claimed}, nil
	case state == 2 && len(v) == 3:
		fp, _ := v[1].(string)
		pttl, _ := v[2].(int64)
		return idem.Claim{State: idem.InProgress, Fingerprint: fp, RetryAfter: time.Duration(max(pttl, 0)) * time.Millisecond}, nil
	case state == 3 && len(v) == 3:
		fp, _ := v[1].(string)
		res, _ := v[2].(string)
		return idem.Claim{State: idem.Done, Fingerprint: fp, Result: []byte(res)}, nil
	case state == 4 && len(v) == 2:
		rec, _ := v[1].(string)
		return s.found(ctx, rk, rec)
	}
	return idem.Claim{}, fmt.Errorf("redisstore: unexpected reply %v from claim script", v)
}

// Record implements idem.Store in one round trip. A claim past its deadline is
// gone from Redis, so recording it fails with idem.ErrClaimLost.
func (s *Store) Record(ctx context.Context, key, token string, result []byte, retention time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.finish(ctx, recordScript, key, token, result, boxedMillis(&s.lastRetain, retention))
}

// Release implements idem.Store in one round trip.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.finish(ctx, releaseScript, key, token)
}

// finish runs script, Record's or Release's, on key's record with the claim
// of token and the script's further arguments (two at most), and returns
// idem.ErrClaimLost unless token owned the claim.
func (s *Store) finish(ctx context.Context, script *redis.Script, key, token string, args ...any) error {
	if !ownerToken(token) {
		return idem.ErrClaimLost
	}
	a := &scriptArgs{keys: [1]string{s.RecordKey(key)}, args: [3]any{claimPrefix(token)}}
	n := 1 + copy(a.args[1:], args)
	owned, err := s.exec.Run(ctx, nil, script, a.keys[:], a.args[:n]...).Int64()
	if err == nil && owned != 1 {
		return idem.ErrClaimLost
	}
	return err
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
