package redisnode

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/lock"
)

var (
	//go:embed inspect.lua
	inspectLua    string
	inspectScript = withModes(inspectLua)

	//go:embed break.lua
	breakLua    string
	breakScript = withModes(breakLua)
)

var (
	_ lock.Inspector = (*Node)(nil)
	_ lock.Lister    = (*Node)(nil)
	_ lock.Breaker   = (*Node)(nil)
)

// Bounds of one ListLocks page: it stops after MaxScansPerPage SCAN calls or
// maxPageTime, whichever comes first, and returns a cursor to go on from.
const (
	MaxScansPerPage = 32
	maxPageTime     = time.Second
)

// InspectLock implements lock.Inspector with one script. Redis records no
// acquisition time (AcquiredAt is zero) and cannot count waiters: Waiters
// is lock.Unknown, and Waiting means an attempt failed on the key within
// the last 10 s.
func (b *Node) InspectLock(ctx context.Context, key string) (lock.LockInfo, error) {
	return b.inspect(ctx, key, inspectScript)
}

// BreakLock implements lock.Breaker: one script deletes the lock and
// publishes the release, keeping the fencing counter. The release is
// published as nobody's, so this Node's own waiters hear it too.
func (b *Node) BreakLock(ctx context.Context, key string) (lock.LockInfo, error) {
	info, err := b.inspect(ctx, key, breakScript, b.channel, anonymous)
	if err != nil {
		return info, err
	}
	if !info.Held {
		return info, fmt.Errorf("%w: redislock: %q is not held", lock.ErrNotHeld, key)
	}
	b.w.released(key)
	return info, nil
}

func (b *Node) inspect(ctx context.Context, key string, s *redis.Script, args ...any) (lock.LockInfo, error) {
	lk := LockKey(b.prefix, key)
	v, err := s.Run(ctx, b.client, []string{lk, lk + ":fence", lk + ":waiters"}, args...).Slice()
	if err != nil {
		return lock.LockInfo{}, fmt.Errorf("redislock: %w", err)
	}
	return lockInfo(key, v)
}

// lockInfo reads inspect.lua's answer.
func lockInfo(key string, v []any) (lock.LockInfo, error) {
	info := lock.LockInfo{Key: key, Waiters: lock.Unknown}
	if len(v) != 4 {
		return info, fmt.Errorf("redislock: inspect answered %d values, want 4", len(v))
	}
	owner, _ := v[0].(string)
	pttl, _ := v[1].(int64)
	tok, _ := v[2].(string)
	flag, _ := v[3].(int64)
	info.Waiting = flag == 1
	if owner == "" {
		return info, nil
	}
	info.Held = true
	_, info.Holder, _ = lock.ParseOwner(owner)
	info.Token, _ = strconv.ParseUint(tok, 10, 64)
	info.TimeLeft = lock.Unknown
	if pttl >= 0 {
		info.TimeLeft = time.Duration(pttl) * time.Millisecond
	}
	return info, nil
}

// ListLocks implements lock.Lister with SCAN (MATCH, COUNT; never KEYS), on
// a Redis Cluster one master after the other. A page ends at limit locks,
// after 32 SCAN calls or after a second, whichever comes first. As with
// SCAN, a lock held throughout a listing is listed, perhaps twice; one
// taken or let go meanwhile may or may not be.
func (b *Node) ListLocks(ctx context.Context, prefix string, limit int, cursor string) (lock.LockPage, error) {
	names, next, err := b.scanKeys(ctx, prefix, "", limit, cursor)
	if err != nil {
		return lock.LockPage{}, err
	}
	page := lock.LockPage{Cursor: next}
	infos, err := b.inspectNames(ctx, names)
	for _, in := range infos {
		if in.Held {
			page.Locks = append(page.Locks, in)
		}
	}
	return page, err
}

// scanKeys SCANs for at most limit Redis keys of lock keys starting with
// prefix, with suffix after the lock key's closing brace (":rw:writer",
// ":sem"; "" for the lock itself), from cursor, and returns them sorted
// within each SCAN batch and the next page's cursor. A page ends at limit
// keys, after 32 SCAN calls or after a second, whichever comes first.
func (b *Node) scanKeys(ctx context.Context, prefix, suffix string, limit int, cursor string) ([]string, string, error) {
	at, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	nodes, err := b.scanners(ctx)
	if err != nil {
		return nil, "", err
	}
	if at.node >= len(nodes) {
		return nil, "", fmt.Errorf("%w: redislock: cursor names server %d of %d", lock.ErrInvalid, at.node, len(nodes))
	}
	match := globEscape(b.prefix + "{")
	if prefix != "" {
		match = globEscape(strings.TrimSuffix(LockKey(b.prefix, prefix), "}"))
	}
	match += "*}" + globEscape(suffix)

	var names []string
	begin := time.Now()
	for scans := 0; len(names) < limit && at.node < len(nodes); scans++ {
		if scans == MaxScansPerPage || time.Since(begin) > maxPageTime {
			break
		}
		batch, next, err := nodes[at.node].Scan(ctx, at.scan, match, int64(max(limit-len(names), 10))).Result()
		if err != nil {
			return nil, "", fmt.Errorf("redislock: %w", err)
		}
		slices.Sort(batch)
		if at.after != "" {
			i, found := slices.BinarySearch(batch, at.after)
			if found {
				i++
			}
			batch = batch[i:]
		}
		if room := limit - len(names); len(batch) > room {
			// Resume inside this batch: SCAN it again, past the last name taken.
			names = append(names, batch[:room]...)
			at.after = names[len(names)-1]
			break
		}
		names = append(names, batch...)
		at.scan, at.after = next, ""
		if next == 0 {
			at.node++
		}
	}
	return names, at.String(len(nodes)), nil
}

// scanNames is scanKeys for the names (lock keys) whose key with suffix
// exists.
func (b *Node) scanNames(ctx context.Context, prefix, suffix string, limit int, cursor string) ([]string, string, error) {
	keys, next, err := b.scanKeys(ctx, prefix, suffix, limit, cursor)
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		if n, ok := userKey(b.prefix, strings.TrimSuffix(k, suffix)); ok {
			names = append(names, n)
		}
	}
	return names, next, err
}

// inspectNames inspects the locks of Redis key names in one pipeline.
func (b *Node) inspectNames(ctx context.Context, names []string) ([]lock.LockInfo, error) {
	if len(names) == 0 {
		return nil, nil
	}
	pipe := b.client.Pipeline()
	keys := make([]string, 0, len(names))
	cmds := make([]*redis.Cmd, 0, len(names))
	for _, n := range names {
		k, ok := userKey(b.prefix, n)
		if !ok {
			continue
		}
		keys = append(keys, k)
		cmds = append(cmds, inspectScript.Eval(ctx, pipe, []string{n, n + ":fence", n + ":waiters"}))
	}
	if _, err := pipe.Exec(ctx); err != nil && len(cmds) > 0 {
		return nil, fmt.Errorf("redislock: %w", err)
	}
	infos := make([]lock.LockInfo, 0, len(cmds))
	for i, c := range cmds {
		v, err := c.Slice()
		if err != nil {
			return nil, fmt.Errorf("redislock: %w", err)
		}
		in, err := lockInfo(keys[i], v)
		if err != nil {
			return nil, err
		}
		infos = append(infos, in)
	}
	return infos, nil
}

type scanner interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
}

// scanners returns the servers to SCAN: every master of a Redis Cluster,
// in the order of their addresses, or the one server.
func (b *Node) scanners(ctx context.Context) ([]scanner, error) {
	type masters interface {
		ForEachMaster(ctx context.Context, fn func(ctx context.Context, c *redis.Client) error) error
	}
	switch c := b.client.(type) {
	case masters:
		var mu sync.Mutex
		var nodes []*redis.Client
		err := c.ForEachMaster(ctx, func(_ context.Context, n *redis.Client) error {
			mu.Lock()
			nodes = append(nodes, n)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("redislock: %w", err)
		}
		slices.SortFunc(nodes, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
		s := make([]scanner, len(nodes))
		for i, n := range nodes {
			s[i] = n
		}
		return s, nil
	case scanner:
		return []scanner{c}, nil
	}
	return nil, fmt.Errorf("%w: redislock: the client cannot SCAN", lock.ErrUnsupported)
}

// scanAt is where a listing goes on: the server, its SCAN cursor, and the
// last name taken from the batch at that cursor ("" if none).
type scanAt struct {
	node  int
	scan  uint64
	after string
}

// String is the cursor for ListLocks, "" when every server was scanned.
func (a scanAt) String(nodes int) string {
	if a.node >= nodes {
		return ""
	}
	return strconv.Itoa(a.node) + "-" + strconv.FormatUint(a.scan, 10) + "-" + base64.RawURLEncoding.EncodeToString([]byte(a.after))
}

func parseCursor(s string) (scanAt, error) {
	if s == "" {
		return scanAt{}, nil
	}
	bad := fmt.Errorf("%w: redislock: %q is not a cursor of a listing", lock.ErrInvalid, s)
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return scanAt{}, bad
	}
	node, err1 := strconv.Atoi(parts[0])
	scan, err2 := strconv.ParseUint(parts[1], 10, 64)
	after, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || node < 0 {
		return scanAt{}, bad
	}
	return scanAt{node: node, scan: scan, after: string(after)}, nil
}

// globEscape quotes s for a SCAN MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\^`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
