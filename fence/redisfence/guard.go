package redisfence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/options"
)

// Client is what a Guard needs from a go-redis client: scripts and MGET.
// *redis.Client, *redis.ClusterClient and every redis.UniversalClient satisfy
// it.
type Client interface {
	redis.Scripter
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (redis.UniversalClient)(nil)
)

//go:embed write.lua
var writeLua string

var writeScript = redis.NewScript(writeLua)

// DefaultTokenSuffix ends the name of every token key, unless
// WithTokenSuffix says otherwise.
const DefaultTokenSuffix = ":fence"

// A Guard writes Redis keys only with tokens at least as high as the key's
// token. It is safe for concurrent use.
type Guard struct {
	c      Client
	suffix string
}

// An Option configures New.
type Option func(*Guard)

// WithTokenSuffix sets what ends a token key's name: non-empty, without
// braces. Default: ":fence" ([DefaultTokenSuffix]).
func WithTokenSuffix(s string) Option { return func(g *Guard) { g.suffix = s } }

// New returns a Guard on c. It touches no server. Errors wrap
// fence.ErrInvalid: a nil client or a bad suffix.
func New(c Client, opts ...Option) (*Guard, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: redisfence: nil client", fence.ErrInvalid)
	}
	g := &Guard{c: c, suffix: DefaultTokenSuffix}
	options.Apply(g, opts)
	if g.suffix == "" || strings.ContainsAny(g.suffix, "{}") {
		return nil, fmt.Errorf("%w: redisfence: token suffix %q must be non-empty and without braces", fence.ErrInvalid, g.suffix)
	}
	return g, nil
}

// TokenKey returns the name of key's token key, in key's hash slot, or an
// error wrapping fence.ErrInvalid for an empty key or one with no hash tag
// that contains '}'.
func (g *Guard) TokenKey(key string) (string, error) {
	switch {
	case key == "":
		return "", fmt.Errorf("%w: redisfence: empty key", fence.ErrInvalid)
	case hasHashTag(key):
		return key + g.suffix, nil
	case !strings.Contains(key, "}"):
		return "{" + key + "}" + g.suffix, nil
	}
	return "", fmt.Errorf("%w: redisfence: key %q has no hash tag but contains '}', so no token key can share its slot", fence.ErrInvalid, key)
}

// hasHashTag reports whether Redis Cluster hashes key by a hash tag: a '{'
// followed, not immediately, by a '}'.
func hasHashTag(key string) bool {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return false
	}
	return strings.IndexByte(key[s+1:], '}') > 0
}

// Set is SET key value [PX expiration] with h's token: applied when the token
// is at least key's token, which it then becomes. An expiration of 0 means
// none; it applies to the value, not to the token. Errors: fence.ErrStale
// (nothing changed), an error wrapping fence.ErrInvalid (bad holder or key,
// negative expiration; the server is not touched), or the client's error.
func (g *Guard) Set(ctx context.Context, h fence.Holder, key string, value any, expiration time.Duration) error {
	if expiration < 0 {
		return fmt.Errorf("%w: redisfence: negative expiration %v", fence.ErrInvalid, expiration)
	}
	ms := expiration.Milliseconds()
	if expiration > 0 && ms == 0 {
		ms = 1
	}
	return g.write(ctx, h, key, "SET", ms, value)
}

// HSet is HSET key field value [field value ...] with h's token, under the
// rule and with the errors of Set. values are field, value pairs; at least
// one pair is required.
func (g *Guard) HSet(ctx context.Context, h fence.Holder, key string, values ...any) error {
	if len(values) == 0 || len(values)%2 != 0 {
		return fmt.Errorf("%w: redisfence: HSet needs field, value pairs, got %d arguments", fence.ErrInvalid, len(values))
	}
	return g.write(ctx, h, key, "HSET", 0, values...)
}

// Del deletes key with h's token, under the rule and with the errors of Set.
// The token key stays, so a writer with a lower token cannot recreate key.
func (g *Guard) Del(ctx context.Context, h fence.Holder, key string) error {
	return g.write(ctx, h, key, "DEL", 0)
}

func (g *Guard) write(ctx context.Context, h fence.Holder, key, op string, ms int64, args ...any) error {
	t, err := fence.TokenOf(h)
	if err != nil {
		return err
	}
	tk, err := g.TokenKey(key)
	if err != nil {
		return err
	}
	argv := append([]any{strconv.FormatUint(t, 10), op, ms}, args...)
	res, err := writeScript.Run(ctx, g.c, []string{key, tk}, argv...).Slice()
	if err != nil {
		return fmt.Errorf("redisfence: %s %q: %w", op, key, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("redisfence: %s %q: unexpected reply %v", op, key, res)
	}
	if applied, _ := res[0].(int64); applied == 1 {
		return nil
	}
	fence.Refused(ctx, fence.Refusal{Guard: "redis", Op: strings.ToLower(op)})
	return fmt.Errorf("%w: token %d, %q has %v", fence.ErrStale, t, key, res[1])
}

// Get returns the string value of key and the highest token applied to it (0
// if none), read together in one MGET. When key does not exist it returns an
// error wrapping fence.ErrNotFound, with the token, which outlives deletion.
// It is for reads and reports: deciding a write on its token would race; the
// guarded writes decide in the server.
func (g *Guard) Get(ctx context.Context, key string) (string, uint64, error) {
	tk, err := g.TokenKey(key)
	if err != nil {
		return "", 0, err
	}
	vals, err := g.c.MGet(ctx, key, tk).Result()
	if err != nil {
		return "", 0, fmt.Errorf("redisfence: get %q: %w", key, err)
	}
	var token uint64
	if s, ok := vals[1].(string); ok {
		if token, err = strconv.ParseUint(s, 10, 64); err != nil {
			return "", 0, fmt.Errorf("redisfence: token key of %q holds %q", key, s)
		}
	}
	v, ok := vals[0].(string)
	if !ok {
		return "", token, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return v, token, nil
}
