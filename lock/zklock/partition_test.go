package zklock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

// TestPartitionFollowerHolderGivesUpFirst cuts a 3-server ensemble in two,
// frames dropped silently: holder A, connected only to follower X, on one
// side with X; the leader, the other follower and successor B on the other.
// X answers A's renewals from its own copy until it notices the leader is
// gone (syncLimit ticks), but the leader hears nothing of A's session and
// expires it one session timeout after its last news of it, deleting A's
// node for B. A's lease must end (Done) before B gets the lock: a renewal
// answered by a cut-off follower must not move A's deadline. Two rounds,
// the partition healed between them.
func TestPartitionFollowerHolderGivesUpFirst(t *testing.T) {
	t.Parallel()
	e := testsvc.StartZooKeeperEnsembleLinked(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ttl = 4 * time.Second
	opts := []zklock.Option{zklock.WithSessionTimeout(ttl), zklock.WithTickTime(500 * time.Millisecond)}
	for round := range 2 {
		leader, err := e.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		x := (leader + 1) % 3
		others := []string{}
		for i, ep := range e.Endpoints() {
			if i != x {
				others = append(others, ep)
			}
		}
		a := newEnsembleLocker(ctx, t, []string{e.Servers[x].Endpoint()}, opts...)
		b := newEnsembleLocker(ctx, t, others, opts...)
		if got := a.SessionTimeout(); got != ttl {
			t.Fatalf("session timeout %v granted, want %v", got, ttl)
		}
		key := "partition-" + testsvc.KeyPrefix(t)
		held, err := a.Acquire(ctx, key, lock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // renewed at least once, on X
		e.Partition(x)
		cut := time.Now()
		got := make(chan time.Time, 1)
		go func() {
			l, err := b.Acquire(ctx, key, lock.WithTTL(ttl), lock.WithWait(time.Minute))
			at := time.Now()
			if err != nil {
				t.Errorf("round %d: B's Acquire: %v", round, err)
				close(got)
				return
			}
			got <- at
			_ = l.Release(context.Background())
		}()
		var doneAt, gotAt time.Time
		select {
		case <-held.Done():
			doneAt = time.Now()
		case <-ctx.Done():
			t.Fatalf("round %d: A's lease never ended", round)
		}
		gotAt, ok := <-got
		if !ok {
			t.FailNow()
		}
		t.Logf("round %d: A's lease ended %v after the cut, B got the lock %v after", round,
			doneAt.Sub(cut).Round(time.Millisecond), gotAt.Sub(cut).Round(time.Millisecond))
		if !doneAt.Before(gotAt) {
			t.Fatalf("round %d: two holders for %v: B got the lock %v after the cut, A's lease ended only %v after it",
				round, doneAt.Sub(gotAt).Round(time.Millisecond), gotAt.Sub(cut).Round(time.Millisecond), doneAt.Sub(cut).Round(time.Millisecond))
		}
		_ = a.Close()
		_ = b.Close()
		e.Heal()
		waitServing(ctx, t, e, x)
	}
}

func newEnsembleLocker(ctx context.Context, t *testing.T, servers []string, opts ...zklock.Option) *zklock.Locker {
	t.Helper()
	l, err := zklock.New(ctx, servers, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// waitServing waits until server i serves again as leader or follower.
func waitServing(ctx context.Context, t *testing.T, e *testsvc.ZooKeeperEnsemble, i int) {
	t.Helper()
	for {
		if mode, err := e.Servers[i].Mode(); err == nil && slices.Contains([]string{"leader", "follower"}, mode) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("server %d did not rejoin: %v", i+1, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
