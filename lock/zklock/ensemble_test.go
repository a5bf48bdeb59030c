package zklock_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

// holderSession returns the session id that owns the lowest-sequence
// contender under dir (the holder's), retrying while the ensemble recovers.
func holderSession(ctx context.Context, t *testing.T, c *zk.Conn, dir string) int64 {
	t.Helper()
	for {
		children, _, err := c.Children(dir)
		if err == nil {
			if first := firstContender(children); first != "" {
				ok, st, err := c.Exists(dir + "/" + first)
				if err == nil && ok {
					return st.EphemeralOwner
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("holder of %s: %v (last: %v)", dir, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestEnsembleServerKilled holds a lock on a 3-server ensemble and kills
// (SIGKILL) a server under the holder, twice:
//
//  1. The leader, under a holder whose Locker knows only the leader: it
//     cannot reconnect, so its lease must be lost (Done closed) before the
//     new leader expires its session and another Locker gets the lock.
//  2. After the first victim rejoined, the server the new holder's session
//     is connected to (a holder that knows all three servers): it may fail
//     over and keep the lease, or lose it.
//
// After each kill another Locker tries to take the lock every 100 ms for
// longer than the TTL. The invariant: the lease survives or its Done fires,
// never two holders. Whenever the other Locker gets the lock, the holder's
// Done must already be closed and the new token must be higher. A lease still
// open after the window has been confirmed by the servers after the kill (or
// its deadline would have passed), and the other Locker must still be
// refused.
func TestEnsembleServerKilled(t *testing.T) {
	began := time.Now()
	e := testsvc.StartZooKeeperEnsemble(t, 3)
	t.Logf("ensemble serving after %v", time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eps := e.Endpoints()
	newLocker := func(servers []string) *zklock.Locker {
		nctx, ncancel := context.WithTimeout(ctx, 20*time.Second)
		defer ncancel()
		return newEnsembleLocker(nctx, t, servers, zklock.WithSessionTimeout(killTTL))
	}
	k := &killedEnsemble{
		t: t, ctx: ctx, e: e,
		// pinned knows only the leader; x and y know every server.
		lockers: []*zklock.Locker{newLocker(eps[leader : leader+1]), newLocker(eps), newLocker(eps)},
	}
	admin, _, err := zk.Connect(eps, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)

	k.held, err = k.lockers[k.cur].Acquire(ctx, killKey, lock.WithTTL(killTTL))
	if err != nil {
		t.Fatal(err)
	}
	k.tokens = []uint64{k.held.Token()}
	if _, err := k.lockers[1].Acquire(ctx, killKey, lock.WithTTL(killTTL), lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second Locker before any kill: %v, want ErrNotAcquired", err)
	}

	victims := []victim{
		{"the leader, the pinned holder's only server", 1, true, func() int { return leader }},
		{"the holder's server", 2, false, func() int { return holderServer(ctx, t, e, admin) }},
	}
	for round, v := range victims {
		k.round(round+1, v, round+1 < len(victims))
	}
	k.finish()
	t.Logf("test body took %v", time.Since(began).Round(time.Millisecond))
}

const (
	killTTL    = 2 * time.Second // = the session timeout: the longest TTL allowed
	killWindow = killTTL + 1500*time.Millisecond
	killKey    = "ensemble"
	killDir    = zklock.DefaultPrefix + "/" + killKey
	killTryCtx = 2 * time.Second
)

// A victim is the server a round of TestEnsembleServerKilled kills.
type victim struct {
	what     string
	other    int // the Locker that tries to take the lock
	mustLose bool
	pick     func() int
}

// killedEnsemble is TestEnsembleServerKilled's state: the Lockers, the
// lease and which of them holds it, the tokens of successive holders, and
// the round under way.
type killedEnsemble struct {
	t       *testing.T
	ctx     context.Context
	e       *testsvc.ZooKeeperEnsemble
	lockers []*zklock.Locker
	held    *lock.Lease
	cur     int // index of the Locker holding the lease
	tokens  []uint64

	n        int            // the round, from 1
	other    *zklock.Locker // the Locker that tries to take the lock this round
	killedAt time.Time
}

// round n kills v's server, has v's other Locker try to take the lock,
// hands the lease over if it did, and, unless last, restarts the server.
func (k *killedEnsemble) round(n int, v victim, restart bool) {
	k.n, k.other = n, k.lockers[v.other]
	idx := v.pick()
	killed := k.e.Servers[idx]
	mode, err := killed.Mode()
	if err != nil || (n == 1 && mode != "leader") {
		k.fatalf("server %d mode %q, %v", idx+1, mode, err)
	}
	if err := killed.Signal(syscall.SIGKILL); err != nil {
		k.t.Fatal(err)
	}
	k.killedAt = time.Now()
	k.logf("killed %s, server %d (%s)", v.what, idx+1, mode)
	if successor := k.settle(k.tryWithinWindow(), v.mustLose); successor != nil {
		k.handOver(successor, v.other)
	}
	if !restart {
		return
	}
	began := time.Now()
	killed.Start() // rejoins as a follower, so the next kill keeps a quorum
	k.logf("server %d rejoined in %v", idx+1, time.Since(began).Round(time.Millisecond))
	if mode, err := killed.Mode(); err != nil || mode != "follower" {
		k.fatalf("restarted server %d: mode %q, %v; want follower", idx+1, mode, err)
	}
}

// finish releases the last lease, has a Locker that knows every server and
// does not hold it take the lock once more, and checks that the tokens of
// successive holders strictly increase.
func (k *killedEnsemble) finish() {
	t := k.t
	if err := k.held.Release(k.ctx); err != nil {
		t.Fatalf("final holder's Release: %v", err)
	}
	next := k.lockers[1] // of the Lockers that know every server, the one not holding
	if k.cur == 1 {
		next = k.lockers[2]
	}
	last, err := next.Acquire(k.ctx, killKey, lock.WithTTL(killTTL), lock.WithWait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	k.tokens = append(k.tokens, last.Token())
	_ = last.Release(k.ctx)
	if !slices.IsSorted(k.tokens) || len(slices.Compact(slices.Clone(k.tokens))) != len(k.tokens) {
		t.Fatalf("tokens of successive holders not strictly increasing: %v", k.tokens)
	}
	strs := make([]string, len(k.tokens))
	for i, tok := range k.tokens {
		strs[i] = strconv.FormatUint(tok, 16)
	}
	t.Logf("tokens (czxid, hex) of successive holders: %v", strs)
}

func (k *killedEnsemble) logf(format string, args ...any) {
	k.t.Helper()
	k.t.Logf("round %d: "+format, append([]any{k.n}, args...)...)
}

func (k *killedEnsemble) fatalf(format string, args ...any) {
	k.t.Helper()
	k.t.Fatalf("round %d: "+format, append([]any{k.n}, args...)...)
}

// take is one try of the other Locker; it fails the test if the other
// Locker gets the lock while the holder's Done is open.
func (k *killedEnsemble) take() (*lock.Lease, error) {
	actx, acancel := context.WithTimeout(k.ctx, killTryCtx)
	defer acancel()
	lease, err := k.other.Acquire(actx, killKey, lock.WithTTL(killTTL), lock.WithWait(0))
	if err == nil && !closed(k.held.Done()) {
		k.fatalf("other Locker acquired %v after the kill while the holder's Done was open: two holders",
			time.Since(k.killedAt))
	}
	return lease, err
}

// tryWithinWindow has the other Locker try every 100 ms until killWindow
// after the kill, and returns the lease it got, or nil.
func (k *killedEnsemble) tryWithinWindow() *lock.Lease {
	tries, failures := 0, 0
	defer func() { k.logf("%d tries, %d failed with errors other than ErrNotAcquired", tries, failures) }()
	for deadline := k.killedAt.Add(killWindow); time.Now().Before(deadline); tries++ {
		lease, err := k.take()
		switch {
		case err == nil:
			tries++
			k.logf("successor in %v after the kill (holder: %v)", time.Since(k.killedAt), k.held.Err())
			return lease
		case !errors.Is(err, lock.ErrNotAcquired):
			failures++ // no server reachable yet, or an election running
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// settle decides the round after the window: the successor the other
// Locker got, or one it gets once a lost lease's node is gone, or nil if
// the lease survived (which it must not if mustLose).
func (k *killedEnsemble) settle(successor *lock.Lease, mustLose bool) *lock.Lease {
	held := k.held
	switch {
	case successor != nil:
		return successor
	case closed(held.Done()):
		// Lost, and the node not yet gone: it goes when the session
		// expires or the loser's cleanup reaches a server.
		k.logf("the lease was lost: %v", held.Err())
		successor, err := k.other.Acquire(k.ctx, killKey, lock.WithTTL(killTTL), lock.WithWait(20*time.Second))
		if err != nil {
			k.fatalf("Acquire after the holder lost its lease: %v", err)
		}
		return successor
	case mustLose:
		k.fatalf("the lease is still open %v after its only server died", time.Since(k.killedAt))
		return nil
	default:
		return k.afterWindow()
	}
}

// afterWindow checks a lease still open for longer than the TTL after the
// kill, so confirmed by a server after the kill: it must still exclude. It
// returns the other Locker's lease if the holder's was lost just after the
// window (Done was closed), nil if the lease survived.
func (k *killedEnsemble) afterWindow() *lock.Lease {
	for {
		lease, err := k.take()
		if err == nil {
			k.logf("the lease was lost after the window: %v", k.held.Err())
			return lease
		}
		if errors.Is(err, lock.ErrNotAcquired) {
			k.logf("the lease survived")
			return nil
		}
		if k.ctx.Err() != nil {
			k.fatalf("ensemble did not recover: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// handOver checks the lost lease's Release and Err and makes successor,
// of Locker other, the held lease.
func (k *killedEnsemble) handOver(successor *lock.Lease, other int) {
	if err := k.held.Release(k.ctx); !errors.Is(err, lock.ErrNotHeld) {
		k.fatalf("Release of the lost lease = %v, want ErrNotHeld", err)
	}
	if !errors.Is(k.held.Err(), lock.ErrLeaseLost) {
		k.fatalf("lost lease's Err = %v, want ErrLeaseLost", k.held.Err())
	}
	k.held, k.cur = successor, other
	k.tokens = append(k.tokens, successor.Token())
}

// holderServer returns the index of the server the session holding
// killDir's lock is connected to, retrying while the ensemble recovers.
func holderServer(ctx context.Context, t *testing.T, e *testsvc.ZooKeeperEnsemble, admin *zk.Conn) int {
	t.Helper()
	sid := holderSession(ctx, t, admin, killDir)
	for {
		if i := e.SessionServer(sid); i >= 0 {
			return i
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no server lists the holder's session %x", sid)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
