package redisnode

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/lockerr"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/driver"
	"github.com/latchkey-go/latchkey/semaphore"
)

var (
	//go:embed sem_acquire.lua
	semAcquireLua    string
	semAcquireScript = withToken(semAcquireLua)

	//go:embed sem_renew.lua
	semRenewLua    string
	semRenewScript = withModes(semRenewLua)

	//go:embed sem_release.lua
	semReleaseLua    string
	semReleaseScript = redis.NewScript(semReleaseLua)

	//go:embed sem_inspect.lua
	semInspectLua    string
	semInspectScript = redis.NewScript(semInspectLua)
)

// semSuffix follows a name's lock key (LockKey) in its semaphore's keys.
const semSuffix = ":sem"

// Semaphores is the semaphore.Backend on one Redis server or Cluster. A
// name's permits are two
// keys beside its lock's, with its hash tag: a sorted set of the holders'
// lease ends (server time, ms) and a hash of N, the permits used and each
// holder's count, token and start; beside them the fencing counter and the
// waiters flag, as a lock's. Every operation is one script; renewals of many permits go in one
// pipeline; releases of waited-for names are published on one channel, to
// which one subscription per Semaphores listens.
type Semaphores struct {
	n *Node // the scripts' runner, subscription and options
}

var (
	_ semaphore.Backend           = (*Semaphores)(nil)
	_ semaphore.BatchRenewer      = (*Semaphores)(nil)
	_ semaphore.ReleaseWatcher    = (*Semaphores)(nil)
	_ semaphore.PipelinedReleaser = (*Semaphores)(nil)
	_ semaphore.Inspector         = (*Semaphores)(nil)
)

// NewSemaphores returns the semaphore backend on client, with the options of
// New. It returns an error wrapping lock.ErrInvalid for a nil client or a bad
// option and touches no server.
func NewSemaphores(client Client, opts ...Option) (*Semaphores, error) {
	n, err := New(client, opts...)
	if err != nil {
		return nil, err
	}
	return &Semaphores{n: n}, nil
}

// Close stops the subscription, as Node.Close does.
func (s *Semaphores) Close() error { return s.n.Close() }

// keys returns the Redis keys of name's semaphore: lease ends, holders,
// fencing counter, waiters flag; then those of the name's other modes an
// acquisition checks (sem_acquire.lua): its lock and read-write writer and
// readers.
func (s *Semaphores) keys(name string) []string {
	lk := LockKey(s.n.prefix, name)
	z := lk + semSuffix
	return []string{z, z + ":holders", z + ":fence", z + ":waiters", lk, lk + ":rw:writer", lk + ":rw:readers"}
}

// renewKeys returns the keys of sem_renew.lua: the lease ends, the holders
// and the name's lock key, which keeps the mark of another mode.
func (s *Semaphores) renewKeys(name string) []string {
	lk := LockKey(s.n.prefix, name)
	z := lk + semSuffix
	return []string{z, z + ":holders", lk}
}

// SemaphoreKeys returns the Redis keys of name's semaphore under prefix, for
// an operator: the sorted set of lease ends and the hash of holders.
// Deleting both revokes every permit of the name.
func SemaphoreKeys(prefix, name string) (ends, holders string) {
	ends = LockKey(prefix, name) + semSuffix
	return ends, ends + ":holders"
}

var errPermitNotHeld = lockerr.NotHeld("redislock: the permit expired or was revoked")

// TryAcquire implements semaphore.Backend.
func (s *Semaphores) TryAcquire(ctx context.Context, r semaphore.Request, owner string, ttl time.Duration) (uint64, time.Duration, error) {
	n, err := s.n.exec.Run(ctx, nil, semAcquireScript, s.keys(r.Name),
		owner, r.Permits, r.Count, millis(ttl), s.n.retention, millis(waitersFlagTTL)).Int64()
	if err != nil {
		if held, ok := strings.CutPrefix(err.Error(), "MISMATCH "); ok {
			h, _ := strconv.Atoi(held)
			return 0, 0, &semaphore.MismatchError{Name: r.Name, Asked: r.Permits, Holders: h}
		}
		return 0, 0, scriptError(err, r.Name)
	}
	if n <= 0 {
		return 0, time.Duration(-n) * time.Millisecond, lock.ErrNotAcquired
	}
	return uint64(n), 0, nil
}

// Renew implements semaphore.Backend.
func (s *Semaphores) Renew(ctx context.Context, r semaphore.Request, owner string, ttl time.Duration) error {
	n, err := s.n.exec.Run(ctx, nil, semRenewScript, s.renewKeys(r.Name), owner, millis(ttl)).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return errPermitNotHeld
	}
	return nil
}

// RenewBatch implements semaphore.BatchRenewer: every permit due, of any
// name, in one pipeline.
func (s *Semaphores) RenewBatch(ctx context.Context, batch []semaphore.Renewal) []error {
	byName := make([]driver.Renewal, len(batch))
	for i, r := range batch {
		byName[i] = driver.Renewal{Key: r.Name, Owner: r.Owner, TTL: r.TTL}
	}
	return s.n.renewBatch(ctx, semRenewScript, errPermitNotHeld, byName, func(r driver.Renewal) []string {
		return s.renewKeys(r.Key)
	})
}

// Release implements semaphore.Backend.
func (s *Semaphores) Release(ctx context.Context, r semaphore.Request, owner string) error {
	return s.release(ctx, r.Name, owner, anonymous, nil)
}

// ReleaseHandoff implements semaphore.PipelinedReleaser, as Node's does.
func (s *Semaphores) ReleaseHandoff(ctx context.Context, r semaphore.Request, owner string, handoff func()) error {
	return s.release(ctx, r.Name, owner, s.n.id, handoff)
}

func (s *Semaphores) release(ctx context.Context, name, owner, id string, ordered func()) error {
	k := s.keys(name)
	n, err := s.n.exec.Run(ctx, ordered, semReleaseScript, []string{k[0], k[1], k[3]}, owner, s.n.channel, id, k[4]).Int64()
	if err != nil {
		return fmt.Errorf("redislock: %w", err)
	}
	if n != 1 {
		return errPermitNotHeld
	}
	return nil
}

// WatchRelease implements semaphore.ReleaseWatcher: a release wakes the
// waiters of every count.
func (s *Semaphores) WatchRelease(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return s.n.w.watch(ctx, name)
}

// InspectSemaphore implements semaphore.Inspector with one script that
// changes nothing. Waiting means an attempt failed within the last 10 s.
func (s *Semaphores) InspectSemaphore(ctx context.Context, name string) (semaphore.Info, error) {
	v, err := semInspectScript.Run(ctx, s.n.client, s.keys(name)[:4]).Slice()
	if err != nil {
		return semaphore.Info{}, fmt.Errorf("redislock: %w", err)
	}
	info := semaphore.Info{Name: name}
	if len(v) < 3 || (len(v)-3)%3 != 0 {
		return info, fmt.Errorf("redislock: semaphore inspection answered %d values", len(v))
	}
	n, _ := v[0].(int64)
	info.Permits = int(n)
	last, _ := v[1].(string)
	info.LastToken, _ = strconv.ParseUint(last, 10, 64)
	w, _ := v[2].(int64)
	info.Waiting = w == 1
	for i := 3; i < len(v); i += 3 {
		owner, _ := v[i].(string)
		left, _ := v[i+1].(int64)
		rec, _ := v[i+2].(string)
		var count int
		var token uint64
		if f := strings.Fields(rec); len(f) == 3 {
			count, _ = strconv.Atoi(f[0])
			token, _ = strconv.ParseUint(f[1], 10, 64)
		}
		_, label, _ := lock.ParseOwner(owner)
		info.Used += count
		info.Holders = append(info.Holders, semaphore.HolderInfo{
			Holder: label, Token: token, Count: count, TimeLeft: time.Duration(left) * time.Millisecond,
		})
	}
	slices.SortFunc(info.Holders, func(a, b semaphore.HolderInfo) int { return cmp.Compare(a.Token, b.Token) })
	return info, nil
}

// ListSemaphores implements semaphore.Lister with SCAN for the names'
// lease-end sets, which exist while a permit is held.
func (s *Semaphores) ListSemaphores(ctx context.Context, prefix string, limit int, cursor string) ([]string, string, error) {
	return s.n.scanNames(ctx, prefix, semSuffix, limit, cursor)
}

// BreakPermits implements semaphore.Breaker: the holder with token, found
// by the inspection script, gives its permits back through sem_release.lua
// as its own Client would (compare-and-delete of its owner, waking
// waiters).
func (s *Semaphores) BreakPermits(ctx context.Context, name string, token uint64) (semaphore.HolderInfo, error) {
	k := s.keys(name)
	v, err := semInspectScript.Run(ctx, s.n.client, k[:4]).Slice()
	if err != nil {
		return semaphore.HolderInfo{}, fmt.Errorf("redislock: %w", err)
	}
	for i := 3; i+2 < len(v); i += 3 {
		owner, _ := v[i].(string)
		left, _ := v[i+1].(int64)
		rec, _ := v[i+2].(string)
		f := strings.Fields(rec)
		if len(f) != 3 || f[1] != strconv.FormatUint(token, 10) {
			continue
		}
		count, _ := strconv.Atoi(f[0])
		_, label, _ := lock.ParseOwner(owner)
		h := semaphore.HolderInfo{Holder: label, Token: token, Count: count, TimeLeft: time.Duration(left) * time.Millisecond}
		err := s.release(ctx, name, owner, anonymous, nil)
		if errors.Is(err, errPermitNotHeld) {
			break
		}
		return h, err
	}
	return semaphore.HolderInfo{}, lockerr.NotHeld(fmt.Sprintf("redislock: no holder of semaphore %q has token %d", name, token))
}
