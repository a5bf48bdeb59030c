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
	const (
		ttl    = 2 * time.Second // = the session timeout: the longest TTL allowed
		window = ttl + 1500*time.Millisecond
		key    = "ensemble"
		dir    = zklock.DefaultPrefix + "/" + key
		tryCtx = 2 * time.Second
	)
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eps := e.Endpoints()
	newLocker := func(servers []string) *zklock.Locker {
		nctx, ncancel := context.WithTimeout(ctx, 20*time.Second)
		defer ncancel()
		l, err := zklock.New(nctx, servers, zklock.WithSessionTimeout(ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	// pinned knows only the leader; x and y know every server.
	lockers := []*zklock.Locker{newLocker(eps[leader : leader+1]), newLocker(eps), newLocker(eps)}
	admin, _, err := zk.Connect(eps, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)

	cur := 0 // index of the Locker holding the lease
	held, err := lockers[cur].Acquire(ctx, key, lock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	tokens := []uint64{held.Token()}
	if _, err := lockers[1].Acquire(ctx, key, lock.WithTTL(ttl), lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second Locker before any kill: %v, want ErrNotAcquired", err)
	}

	victims := []struct {
		what     string
		other    int // the Locker that tries to take the lock
		mustLose bool
		pick     func() int
	}{
		{"the leader, the pinned holder's only server", 1, true, func() int { return leader }},
		{"the holder's server", 2, false, func() int {
			sid := holderSession(ctx, t, admin, dir)
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
		}},
	}
	for round, v := range victims {
		idx := v.pick()
		killed := e.Servers[idx]
		mode, err := killed.Mode()
		if err != nil || (round == 0 && mode != "leader") {
			t.Fatalf("round %d: server %d mode %q, %v", round+1, idx+1, mode, err)
		}
		if err := killed.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killedAt := time.Now()
		t.Logf("round %d: killed %s, server %d (%s)", round+1, v.what, idx+1, mode)

		other := lockers[v.other]
		// take is one try of the other Locker; it fails the test if the
		// other Locker gets the lock while the holder's Done is open.
		take := func() (*lock.Lease, error) {
			actx, acancel := context.WithTimeout(ctx, tryCtx)
			defer acancel()
			lease, err := other.Acquire(actx, key, lock.WithTTL(ttl), lock.WithWait(0))
			if err == nil && !closed(held.Done()) {
				t.Fatalf("round %d: other Locker acquired %v after the kill while the holder's Done was open: two holders",
					round+1, time.Since(killedAt))
			}
			return lease, err
		}
		var successor *lock.Lease
		tries, failures := 0, 0
		for deadline := killedAt.Add(window); successor == nil && time.Now().Before(deadline); tries++ {
			lease, err := take()
			switch {
			case err == nil:
				successor = lease
				t.Logf("round %d: successor in %v after the kill (holder: %v)", round+1, time.Since(killedAt), held.Err())
				continue
			case !errors.Is(err, lock.ErrNotAcquired):
				failures++ // no server reachable yet, or an election running
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("round %d: %d tries, %d failed with errors other than ErrNotAcquired", round+1, tries, failures)

		switch {
		case successor != nil:
		case closed(held.Done()):
			// Lost, and the node not yet gone: it goes when the session
			// expires or the loser's cleanup reaches a server.
			t.Logf("round %d: the lease was lost: %v", round+1, held.Err())
			if successor, err = other.Acquire(ctx, key, lock.WithTTL(ttl), lock.WithWait(20*time.Second)); err != nil {
				t.Fatalf("round %d: Acquire after the holder lost its lease: %v", round+1, err)
			}
		case v.mustLose:
			t.Fatalf("round %d: the lease is still open %v after its only server died", round+1, time.Since(killedAt))
		default:
			// Open for longer than the TTL after the kill, so the server
			// confirmed it after the kill: it must still exclude.
			for successor == nil {
				lease, err := take()
				if err == nil {
					successor = lease // lost just after the window; Done was closed
					t.Logf("round %d: the lease was lost after the window: %v", round+1, held.Err())
					break
				}
				if errors.Is(err, lock.ErrNotAcquired) {
					t.Logf("round %d: the lease survived", round+1)
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("round %d: ensemble did not recover: %v", round+1, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if successor != nil {
			if err := held.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("round %d: Release of the lost lease = %v, want ErrNotHeld", round+1, err)
			}
			if !errors.Is(held.Err(), lock.ErrLeaseLost) {
				t.Fatalf("round %d: lost lease's Err = %v, want ErrLeaseLost", round+1, held.Err())
			}
			held, cur = successor, v.other
			tokens = append(tokens, held.Token())
		}
		if round+1 < len(victims) {
			began := time.Now()
			killed.Start() // rejoins as a follower, so the next kill keeps a quorum
			t.Logf("round %d: server %d rejoined in %v", round+1, idx+1, time.Since(began).Round(time.Millisecond))
			if mode, err := killed.Mode(); err != nil || mode != "follower" {
				t.Fatalf("round %d: restarted server %d: mode %q, %v; want follower", round+1, idx+1, mode, err)
			}
		}
	}

	if err := held.Release(ctx); err != nil {
		t.Fatalf("final holder's Release: %v", err)
	}
	next := lockers[1] // of the Lockers that know every server, the one not holding
	if cur == 1 {
		next = lockers[2]
	}
	last, err := next.Acquire(ctx, key, lock.WithTTL(ttl), lock.WithWait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, last.Token())
	_ = last.Release(ctx)
	if !slices.IsSorted(tokens) || len(slices.Compact(slices.Clone(tokens))) != len(tokens) {
		t.Fatalf("tokens of successive holders not strictly increasing: %v", tokens)
	}
	strs := make([]string, len(tokens))
	for i, tok := range tokens {
		strs[i] = strconv.FormatUint(tok, 16)
	}
	t.Logf("tokens (czxid, hex) of successive holders: %v", strs)
	t.Logf("test body took %v", time.Since(began).Round(time.Millisecond))
}
