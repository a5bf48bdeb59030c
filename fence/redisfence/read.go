package redisfence

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/fence"
)

//go:embed read.lua
var readLua string

var readScript = redis.NewScript(readLua)

// Read raises key's token to h's, unless key's token is higher, and returns
// key's string value, in one script: from the read on, every write with a
// lower token is refused, so a holder that computes its next write from
// what it read cannot have a stale holder's write slip in between. Fencing
// the write alone is not enough for a read-modify-write: the fresh holder
// (token 2) reads 1000; the paused stale holder (token 1) wakes and writes
// 900, accepted because the key still carries token 0; the fresh holder
// writes 700 from its read, and the stale holder's acknowledged debit is
// gone. Read first, and the stale write is refused.
//
// The claim is made also when key holds no value (the token key outlives
// it), so a holder that finds nothing and creates the value is fenced too;
// Read then returns an error wrapping fence.ErrNotFound. Errors:
// fence.ErrStale (key has a higher token; nothing changed, nothing read),
// fence.ErrNotFound (claimed, no value), an error wrapping fence.ErrInvalid
// (bad holder or key; the server is not touched), or the client's error,
// such as WRONGTYPE for a key that is not a string (nothing changed).
func (g *Guard) Read(ctx context.Context, h fence.Holder, key string) (string, error) {
	v, err := g.read(ctx, h, key, "GET")
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	return s, nil
}

// HRead is Read for a hash: it claims key as Read does and returns the
// named fields, or every field when none is named, in one script. A field
// the hash lacks is absent from the map. Errors are Read's; fence.ErrNotFound
// means key does not exist (the claim is made).
func (g *Guard) HRead(ctx context.Context, h fence.Holder, key string, fields ...string) (map[string]string, error) {
	op, args := "HGETALL", []any(nil)
	if len(fields) > 0 {
		op = "HMGET"
		for _, f := range fields {
			args = append(args, f)
		}
	}
	v, err := g.read(ctx, h, key, op, args...)
	if err != nil {
		return nil, err
	}
	vals, _ := v.([]any)
	m := make(map[string]string, len(vals))
	if len(fields) == 0 {
		for i := 0; i+1 < len(vals); i += 2 {
			f, _ := vals[i].(string)
			m[f], _ = vals[i+1].(string)
		}
		return m, nil
	}
	for i, f := range fields {
		if i < len(vals) {
			if s, ok := vals[i].(string); ok {
				m[f] = s
			}
		}
	}
	return m, nil
}

// read runs the read script and returns the value it read, or
// fence.ErrNotFound when key does not exist.
func (g *Guard) read(ctx context.Context, h fence.Holder, key, op string, args ...any) (any, error) {
	t, err := fence.TokenOf(h)
	if err != nil {
		return nil, err
	}
	tk, err := g.TokenKey(key)
	if err != nil {
		return nil, err
	}
	argv := append([]any{strconv.FormatUint(t, 10), op}, args...)
	res, err := readScript.Run(ctx, g.c, []string{key, tk}, argv...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisfence: read %q: %w", key, err)
	}
	claimed, _ := res[0].(int64)
	switch {
	case claimed == 0 && len(res) == 2:
		fence.Refused(ctx, fence.Refusal{Guard: "redis", Op: "read"})
		return nil, fmt.Errorf("%w: token %d, %q has %v", fence.ErrStale, t, key, res[1])
	case claimed != 1 || len(res) < 3:
		return nil, fmt.Errorf("redisfence: read %q: unexpected reply %v", key, res)
	}
	if exists, _ := res[2].(int64); exists == 0 {
		return nil, fmt.Errorf("%w: %q", fence.ErrNotFound, key)
	}
	if len(res) < 4 {
		return nil, nil
	}
	return res[3], nil
}
