package etcdlock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/lock/locktest"
)

func TestOperator(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	locktest.RunOperator(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker { return newLocker(t, newClient(t, srv)) },
	})
}

// A shell script's `etcdctl lock` holds a name while one of our services
// waits on it: the operator sees etcdctl's key as the holder and our
// service as its waiter, in a listing too.
func TestOperatorSeesEtcdctlHolder(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx := t.Context()
	name := "etcdctl-" + testsvc.KeyPrefix(t)
	ours := newLocker(t, newClient(t, srv))
	theirs := startEtcdctlLock(t, srv, name, "echo held; sleep 30")
	if !theirs.waitOutput("held", 5*time.Second) {
		t.Fatalf("etcdctl lock did not get the lock; stderr %q", theirs.errb.String())
	}
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := ours.Acquire(ctx, name, lock.WithTTL(5*time.Second), lock.WithHolder("ours"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	var info lock.LockInfo
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if info, err = lock.Inspect(ctx, ours, name); err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 || time.Now().After(deadline) {
			break
		}
	}
	if !info.Held || info.Holder != "" || info.Waiters != 1 || info.Token == 0 ||
		len(info.Entry) <= len(name)+1 || info.Entry[:len(name)+1] != name+"/" || info.TimeLeft <= 0 {
		t.Fatalf("Inspect while etcdctl holds = %+v, want etcdctl's key held, our Acquire waiting", info)
	}
	page, err := lock.List(ctx, ours, "etcdctl-", 10, "")
	if err != nil || len(page.Locks) != 1 || page.Locks[0].Entry != info.Entry || page.Locks[0].Waiters != 1 {
		t.Fatalf("List = %+v, %v; want just %+v", page, err, info)
	}
	broken, err := lock.Break(ctx, ours, name, "oncall", nil)
	if err != nil || broken.Token != info.Token {
		t.Fatalf("Break = %+v, %v", broken, err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	if lease.Token() <= info.Token {
		t.Fatalf("token %d after breaking etcdctl's %d", lease.Token(), info.Token)
	}
	_ = lease.Release(ctx)
}

// A read-write lock and a semaphore held on one etcd, with the lock's
// default prefix: the operator's lock listing shows neither as a lock
// ("prices/write" or "latchkey/semaphore/exports" held by nobody it
// knows), and each kind's own listing shows its own.
func TestListingKeepsKindsApart(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx := t.Context()
	c := newClient(t, srv)
	p := testsvc.KeyPrefix(t)
	rw, err := etcdlock.NewRW(c)
	if err != nil {
		t.Fatal(err)
	}
	w, err := rw.Lock(ctx, p+"prices", lock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Release(ctx) }()
	sems, err := etcdlock.NewSemaphores(c)
	if err != nil {
		t.Fatal(err)
	}
	sem, err := sems.Semaphore(p+"exports", 3)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sem.Acquire(ctx, lock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Release(ctx) }()

	locks := newLocker(t, c)
	for _, prefix := range []string{"", p} {
		page, err := lock.List(ctx, locks, prefix, lock.MaxListLimit, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Locks {
			if strings.Contains(l.Key, p) {
				t.Errorf("List(%q) shows %q as a lock; only a read-write lock and a semaphore are held", prefix, l.Key)
			}
		}
	}
	rws, err := rw.List(ctx, p, 10, "")
	if err != nil || len(rws.RWLocks) != 1 || rws.RWLocks[0].Name != p+"prices" {
		t.Errorf("rwlock List = %+v, %v; want %q", rws, err, p+"prices")
	}
	sp, err := sems.List(ctx, p, 10, "")
	if err != nil || len(sp.Semaphores) != 1 || sp.Semaphores[0].Name != p+"exports" {
		t.Errorf("semaphore List = %+v, %v; want %q", sp, err, p+"exports")
	}
}
