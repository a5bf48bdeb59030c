package redisnode

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
)

var (
	//go:embed rw_acquire.lua
	rwAcquireLua    string
	rwAcquireScript = withToken(rwAcquireLua)

	//go:embed rw_renew.lua
	rwRenewLua    string
	rwRenewScript = withModes(rwRenewLua)

	//go:embed rw_release.lua
	rwReleaseLua    string
	rwReleaseScript = redis.NewScript(rwReleaseLua)

	//go:embed rw_withdraw.lua
	rwWithdrawLua    string
	rwWithdrawScript = redis.NewScript(rwWithdrawLua)

	//go:embed rw_inspect.lua
	rwInspectLua    string
	rwInspectScript = redis.NewScript(rwInspectLua)
)

// RW is the rwlock.Backend on a Node's server: a read-write lock per name,
// in six keys that share the name's hash tag, beside (and apart from)
// the name's plain lock. Its releases are published on the Node's channel
// under the name's lock key, so the Node's one subscription wakes both
// kinds of waiters. Close closes the Node.
type RW struct {
	n *Node
	// readers maps a reader's owner to its member in the readers zset,
	// "<token> <owner>", for its renewals and its release; the Manager
	// renews and releases an owner's lease in the process that took it.
	readers sync.Map
}

var (
	_ rwlock.Backend        = (*RW)(nil)
	_ rwlock.ReleaseWatcher = (*RW)(nil)
	_ rwlock.Inspector      = (*RW)(nil)
)

// RW returns the read-write locks on b's server.
func (b *Node) RW() *RW { return &RW{n: b} }

// member returns what owner is called in mode's keys: a reader's zset
// member, a writer's owner. known is false for a reader whose member this
// RW never learned (its attempt's answer was lost): owner is returned.
func (rw *RW) member(owner string, mode rwlock.Mode) (member string, known bool) {
	if mode == rwlock.Read {
		m, ok := rw.readers.Load(owner)
		if !ok {
			return owner, false
		}
		return m.(string), true
	}
	return owner, true
}

// Close closes the Node.
func (rw *RW) Close() error { return rw.n.Close() }

// RWKeys returns the Redis keys of name's read-write lock under prefix, in
// the order of rw_acquire.lua's KEYS: the writer, its token, the readers
// (with their tokens), the waiting writers' intents, the fencing counter
// and the waiters flag.
func RWKeys(prefix, name string) []string {
	base := LockKey(prefix, name) + ":rw:"
	return []string{base + "writer", base + "writer-token", base + "readers", base + "intents", base + "fence", base + "waiters"}
}

func modeArg(m rwlock.Mode) string {
	if m == rwlock.Read {
		return "r"
	}
	return "w"
}

// readersKept is how long, in ms, the readers' keys of a name live past
// their last write: the token retention, and at least the longest lease,
// so that no reader's entry expires with its key while its lease lives.
func (rw *RW) readersKept() int64 { return max(rw.n.retention, millis(lock.MaxTTL)) }

// TryAcquire implements rwlock.Backend.
func (rw *RW) TryAcquire(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration, intent bool) (uint64, time.Duration, error) {
	b := rw.n
	in := "0"
	if intent {
		in = "1"
	}
	lk := LockKey(b.prefix, name)
	ends, holders := SemaphoreKeys(b.prefix, name)
	keys := append(RWKeys(b.prefix, name), lk, ends, holders)
	n, err := b.exec.Run(ctx, nil, rwAcquireScript, keys,
		owner, modeArg(mode), millis(ttl), in, millis(rwlock.IntentTTL), b.retention, millis(waitersFlagTTL), rw.readersKept()).Int64()
	if err != nil {
		return 0, 0, scriptError(err, name)
	}
	if n <= 0 {
		return 0, time.Duration(-n) * time.Millisecond, lock.ErrNotAcquired
	}
	if mode == rwlock.Read {
		rw.readers.Store(owner, strconv.FormatInt(n, 10)+" "+owner)
	}
	return uint64(n), 0, nil
}

// Renew implements rwlock.Backend.
func (rw *RW) Renew(ctx context.Context, name, owner string, mode rwlock.Mode, ttl time.Duration) error {
	b := rw.n
	member, _ := rw.member(owner, mode) // an unknown reader is not renewed
	keys := append(RWKeys(b.prefix, name), LockKey(b.prefix, name))
	n, err := b.exec.Run(ctx, nil, rwRenewScript, keys, member, modeArg(mode), millis(ttl), rw.readersKept()).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return errNotHeld
	}
	return nil
}

// message is what a release of name publishes: heard by every Node's
// waiters of name, this one's included.
func (rw *RW) message(name string) string {
	return anonymous + LockKey(rw.n.prefix, name)
}

// Release implements rwlock.Backend.
func (rw *RW) Release(ctx context.Context, name, owner string, mode rwlock.Mode) error {
	b := rw.n
	member, known := rw.member(owner, mode)
	if mode == rwlock.Read {
		rw.readers.Delete(owner)
	}
	find := "0"
	if !known {
		find = "1"
	}
	n, err := b.exec.Run(ctx, nil, rwReleaseScript, RWKeys(b.prefix, name), member, modeArg(mode), b.channel, rw.message(name), find).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return errNotHeld
	}
	return nil
}

// Withdraw implements rwlock.Backend.
func (rw *RW) Withdraw(ctx context.Context, name, owner string) error {
	b := rw.n
	if err := b.exec.Run(ctx, nil, rwWithdrawScript, RWKeys(b.prefix, name), owner, b.channel, rw.message(name)).Err(); err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	return nil
}

// WatchRelease implements rwlock.Backend with the Node's subscription.
func (rw *RW) WatchRelease(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return rw.n.w.watch(ctx, name)
}

// InspectRW implements rwlock.Inspector with one script.
func (rw *RW) InspectRW(ctx context.Context, name string) (rwlock.Info, error) {
	b := rw.n
	v, err := rwInspectScript.Run(ctx, b.client, RWKeys(b.prefix, name)).Slice()
	if err != nil {
		return rwlock.Info{}, fmt.Errorf("redislock: %w", err)
	}
	if len(v) < 5 || (len(v)-5)%2 != 0 {
		return rwlock.Info{}, fmt.Errorf("redislock: rw inspect answered %d values", len(v))
	}
	str := func(x any) string { s, _ := x.(string); return s }
	num := func(x any) int64 {
		switch x := x.(type) {
		case int64:
			return x
		case string:
			n, _ := strconv.ParseInt(x, 10, 64)
			return n
		}
		return 0
	}
	info := rwlock.Info{Token: uint64(num(v[3])), WritersWaiting: int(num(v[4]))}
	if w := str(v[0]); w != "" {
		info.Writer = &rwlock.Holder{Label: w, Token: uint64(num(v[1])), TimeLeft: time.Duration(max(num(v[2]), 0)) * time.Millisecond}
	}
	for i := 5; i < len(v); i += 2 {
		tok, owner, _ := strings.Cut(str(v[i]), " ")
		info.Readers = append(info.Readers, rwlock.Holder{Label: owner, Token: uint64(num(tok)), TimeLeft: time.Duration(num(v[i+1])) * time.Millisecond})
	}
	return info, nil
}

// ListRW implements rwlock.Lister with SCAN for the names' fencing
// counters, which live as long as the tokens are kept; Locker.List keeps
// the names held now.
func (rw *RW) ListRW(ctx context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	return rw.n.scanNames(ctx, prefix, ":rw:fence", limit, cursor)
}

// BreakRW implements rwlock.Breaker: the holder with token, found by the
// inspection script, is released by rw_release.lua as its own Locker
// would release it (compare-and-delete of its owner, waking waiters).
func (rw *RW) BreakRW(ctx context.Context, name string, token uint64) (rwlock.Holder, bool, error) {
	b := rw.n
	h, writer, err := rwlock.HolderOf(ctx, rw, name, token)
	if err != nil {
		return h, writer, err
	}
	mode, member := rwlock.ModeOf(writer), h.Label
	if !writer {
		member = strconv.FormatUint(token, 10) + " " + h.Label
	}
	n, err := b.exec.Run(ctx, nil, rwReleaseScript, RWKeys(b.prefix, name), member, modeArg(mode), b.channel, rw.message(name), "0").Int64()
	if err != nil {
		return h, false, fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return h, false, lockerr.NotHeld(fmt.Sprintf("redislock: the holder of %q with token %d left meanwhile", name, token))
	}
	return h, writer, nil
}
