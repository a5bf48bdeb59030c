// Package redisstore is a dedup.Store on Redis (go-redis v9): a single
// server, a Sentinel-managed one, or a Cluster.
//
// Each message id is one short string key, prefix + "{" + id + "}", holding
// the owner's token while processing and one byte once done, with a PX
// expiry at the processing TTL or the retention (Redis's clock). A claim of
// a new id is one plain SET NX PX (a duplicate's costs a second round
// trip), a done and a release one Lua script each, so one round trip per
// step; ClaimBatch pipelines a plain SET NX GET per id (Redis 7.0 and
// later; the claim script before), one round trip per batch (per shard on
// Cluster). The braces are a hash tag: every script
// touches one key, so all of them run on Cluster, and a batch's ids spread
// over the shards instead of piling onto one.
//
// Redis keeps records in memory and, depending on persistence, may lose them
// on a restart or failover: a duplicate then passes. For money, put the
// transactional inbox (sqlinbox) behind it, or use it alone only where the
// handler's effect is itself idempotent.
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/idem"
)

var (
	//go:embed claim.lua
	claimLua string
	//go:embed done.lua
	doneLua string
	//go:embed release.lua
	releaseLua string

	claimScript   = redis.NewScript(claimLua)
	doneScript    = redis.NewScript(doneLua)
	releaseScript = redis.NewScript(releaseLua)
)

// Client is the part of a go-redis client the store uses; *redis.Client,
// *redis.ClusterClient, *redis.Ring and redis.UniversalClient all fit.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

var (
	_ Client             = (*redis.Client)(nil)
	_ Client             = (*redis.ClusterClient)(nil)
	_ Client             = (redis.UniversalClient)(nil)
	_ dedup.Store        = (*Store)(nil)
	_ dedup.BatchClaimer = (*Store)(nil)
)

// doneMark is a done record's value; tokens are hex, so never equal to it.
const doneMark = "="

// DefaultPrefix starts every key the store writes unless WithPrefix says
// otherwise.
const DefaultPrefix = "dedup:"

// Store keeps message ids in Redis. It is safe for concurrent use.
type Store struct {
	c        Client
	prefix   string
	noSetGet atomic.Bool // the server refused SET NX GET: batches use the script
}

// An Option configures New.
type Option func(*Store)

// WithPrefix sets the prefix of every key the store writes. Default: "dedup:"
// ([DefaultPrefix]). Give each consumer group, or each purpose a message is
// processed for, its own prefix: ids under different prefixes never meet. It
// must not contain '{' or '}', which would change the hash tag.
func WithPrefix(p string) Option {
	return func(s *Store) { s.prefix = p }
}

// New returns a store on c. A nil c, or a prefix with braces, makes every
// call fail with dedup.ErrInvalid.
func New(c Client, opts ...Option) *Store {
	s := &Store{c: c, prefix: DefaultPrefix}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s
}

// RecordKey returns the Redis key that holds id's record.
func (s *Store) RecordKey(id string) string { return s.prefix + "{" + id + "}" }

func (s *Store) check() error {
	if s == nil || s.c == nil {
		return fmt.Errorf("%w: nil Redis client", dedup.ErrInvalid)
	}
	for i := 0; i < len(s.prefix); i++ {
		if s.prefix[i] == '{' || s.prefix[i] == '}' {
			return fmt.Errorf("%w: dedup/redisstore: prefix %q contains a brace", dedup.ErrInvalid, s.prefix)
		}
	}
	return nil
}

func ms(d time.Duration) int64 { return max(1, int64((d+time.Millisecond-1)/time.Millisecond)) }

// Claim implements dedup.Store in one round trip and one Redis command for
// a new id, a plain SET NX PX (a script costs Redis several times more for
// the same step, and a nil reply costs go-redis a dozen allocations, so
// the answer that the id was new is SET's OK). A refused claim, the rare
// case of a duplicate, costs a second round trip: GET and PTTL, pipelined,
// tell a done id from one in progress and when its claim ends.
func (s *Store) Claim(ctx context.Context, id string, ttl time.Duration) (dedup.Claim, error) {
	if err := s.check(); err != nil {
		return dedup.Claim{}, err
	}
	tok := idem.NewToken()
	key := s.RecordKey(id)
	ok, err := s.c.SetNX(ctx, key, tok, time.Duration(ms(ttl))*time.Millisecond).Result()
	switch {
	case err != nil:
		return dedup.Claim{}, err
	case ok:
		return dedup.Claim{State: dedup.Claimed, Token: tok}, nil
	}
	p := s.c.Pipeline()
	get, pttl := p.Get(ctx, key), p.PTTL(ctx, key)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return dedup.Claim{}, err
	}
	if get.Val() == doneMark {
		return dedup.Claim{State: dedup.Done}, nil
	}
	// In progress, or gone in between (its owner released it, or it
	// expired): either way the caller retries, after the claim's remaining
	// TTL if there is one.
	return dedup.Claim{State: dedup.InProgress, RetryAfter: max(pttl.Val(), 0)}, nil
}

func parseClaim(v []any, tok string) (dedup.Claim, error) {
	state := int64(0)
	if len(v) > 0 {
		state, _ = v[0].(int64)
	}
	switch {
	case state == 1:
		return dedup.Claim{State: dedup.Claimed, Token: tok}, nil
	case state == 2 && len(v) == 2:
		pttl, _ := v[1].(int64)
		return dedup.Claim{State: dedup.InProgress, RetryAfter: time.Duration(max(pttl, 0)) * time.Millisecond}, nil
	case state == 3:
		return dedup.Claim{State: dedup.Done}, nil
	}
	return dedup.Claim{}, fmt.Errorf("dedup/redisstore: unexpected reply %v from claim script", v)
}

// ClaimBatch implements dedup.BatchClaimer in one round trip (per shard on
// Cluster): one pipeline of plain SET NX GET commands, which cost Redis far
// less than a script each. An id given twice is claimed by its first
// occurrence. An in-progress answer carries no RetryAfter (0, unknown): the
// pipeline holds no PTTL, which would double its commands for a rare case.
// Servers older than Redis 7.0, which refuse NX together with GET, get the
// claim script for every id instead, still in one pipeline.
func (s *Store) ClaimBatch(ctx context.Context, ids []string, ttl time.Duration) ([]dedup.Claim, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return []dedup.Claim{}, nil
	}
	toks := make([]string, len(ids))
	for i := range toks {
		toks[i] = idem.NewToken()
	}
	if !s.noSetGet.Load() {
		out, err := s.claimSetGet(ctx, ids, toks, ttl)
		if !errors.Is(err, errNoSetGet) {
			return out, err
		}
		s.noSetGet.Store(true)
	}
	return s.claimScripts(ctx, ids, toks, ttl)
}

// errNoSetGet says the server refused SET NX GET (before Redis 7.0); such a
// refusal changes nothing.
var errNoSetGet = errors.New("dedup/redisstore: server refuses SET NX GET")

func (s *Store) claimSetGet(ctx context.Context, ids, toks []string, ttl time.Duration) ([]dedup.Claim, error) {
	p := s.c.Pipeline()
	cmds := make([]*redis.StatusCmd, len(ids))
	for i, id := range ids {
		cmds[i] = p.SetArgs(ctx, s.RecordKey(id), toks[i], redis.SetArgs{Mode: "NX", Get: true, TTL: time.Duration(ms(ttl)) * time.Millisecond})
	}
	_, err := p.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		for _, c := range cmds {
			if e := c.Err(); e != nil && redis.HasErrorPrefix(e, "ERR syntax") {
				return nil, errNoSetGet
			}
		}
		return nil, err
	}
	out := make([]dedup.Claim, len(ids))
	for i, c := range cmds {
		v, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
			out[i] = dedup.Claim{State: dedup.Claimed, Token: toks[i]}
		case err != nil:
			return nil, err
		case v == doneMark:
			out[i] = dedup.Claim{State: dedup.Done}
		default:
			out[i] = dedup.Claim{State: dedup.InProgress}
		}
	}
	return out, nil
}

// claimScripts is ClaimBatch with the claim script for every id.
func (s *Store) claimScripts(ctx context.Context, ids, toks []string, ttl time.Duration) ([]dedup.Claim, error) {
	all := make([]int, len(ids))
	for i := range all {
		all[i] = i
	}
	cmds := make([]*redis.Cmd, len(ids))
	err := s.claimPipeline(ctx, ids, toks, ms(ttl), all, cmds)
	if missing := noScript(cmds); err != nil && len(missing) > 0 {
		// EVALSHA failed before running on a server without the script
		// (a restart, SCRIPT FLUSH, a new shard): load it everywhere and
		// send those ids again. The others ran and must not run twice.
		if lerr := claimScript.Load(ctx, s.c).Err(); lerr != nil {
			return nil, lerr
		}
		err = s.claimPipeline(ctx, ids, toks, ms(ttl), missing, cmds)
	}
	if err != nil {
		return nil, err
	}
	out := make([]dedup.Claim, len(ids))
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if err != nil {
			return nil, err
		}
		if out[i], err = parseClaim(v, toks[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// claimPipeline sends the claim script for ids[i], i in idx, in one
// pipeline, storing each command in cmds[i].
func (s *Store) claimPipeline(ctx context.Context, ids, toks []string, ttl int64, idx []int, cmds []*redis.Cmd) error {
	p := s.c.Pipeline()
	for _, i := range idx {
		cmds[i] = claimScript.EvalSha(ctx, p, []string{s.RecordKey(ids[i])}, toks[i], ttl)
	}
	_, err := p.Exec(ctx)
	return err
}

// noScript returns the indexes of the commands that failed only because the
// script was not cached; each of them left its key untouched.
func noScript(cmds []*redis.Cmd) []int {
	var idx []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			idx = append(idx, i)
		}
	}
	return idx
}

// Done implements dedup.Store in one round trip. A claim past its TTL is gone
// from Redis, so marking it done fails with dedup.ErrClaimLost.
func (s *Store) Done(ctx context.Context, id, token string, retention time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	return one(doneScript.Run(ctx, s.c, []string{s.RecordKey(id)}, token, ms(retention)).Int64())
}

// Release implements dedup.Store in one round trip.
func (s *Store) Release(ctx context.Context, id, token string) error {
	if err := s.check(); err != nil {
		return err
	}
	return one(releaseScript.Run(ctx, s.c, []string{s.RecordKey(id)}, token).Int64())
}

func one(n int64, err error) error {
	if err != nil {
		return err
	}
	if n != 1 {
		return dedup.ErrClaimLost
	}
	return nil
}
