package etcdlock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.uber.org/zap"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/etcdlock"
	"github.com/latchkey-go/latchkey/rwlock"
	"github.com/latchkey-go/latchkey/rwlock/rwlocktest"
)

func newRW(t testing.TB, c etcdlock.Client, opts ...etcdlock.Option) *rwlock.Locker {
	t.Helper()
	l, err := etcdlock.NewRW(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRWConformance(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	prefix := testsvc.KeyPrefix(t)
	rwlocktest.Run(t, rwlocktest.Harness{
		New: func(t *testing.T) *rwlock.Locker {
			return newRW(t, newClient(t, srv), etcdlock.WithPrefix(prefix))
		},
	})
}

func TestRWNilClient(t *testing.T) {
	if _, err := etcdlock.NewRW(nil); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("NewRW(nil) = %v, want ErrInvalid", err)
	}
	var c *clientv3.Client
	if _, err := etcdlock.NewRW(c); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("NewRW(nil *Client) = %v, want ErrInvalid", err)
	}
}

// TestRWRecipeInterop runs etcd's own recipe.RWMutex against this package
// on one name: each side's writer keeps the other's readers out, and the
// other way round, and a recipe reader queued behind our waiting writer
// waits for it.
func TestRWRecipeInterop(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	c := newClient(t, srv)
	l := newRW(t, c)
	name := "interop-" + testsvc.KeyPrefix(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sess, err := concurrency.NewSession(c, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	// The recipe's writer keeps our reader and writer out.
	rw := recipe.NewRWMutex(sess, name)
	if err := rw.Lock(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RLock(ctx, name, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("our RLock under the recipe's writer = %v, want ErrNotAcquired", err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := l.RLock(ctx, name)
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("our reader got in under the recipe's writer (%v)", err)
	default:
	}
	if err := rw.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("our reader after the recipe's writer left: %v", err)
	}

	// Our writer keeps the recipe's reader out.
	w, err := l.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	rr := recipe.NewRWMutex(sess, name)
	rdone := make(chan error, 1)
	go func() { rdone <- rr.RLock() }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-rdone:
		t.Fatalf("the recipe's reader got in under our writer (%v)", err)
	default:
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-rdone; err != nil {
		t.Fatal(err)
	}
	// The recipe's reader keeps our writer out, and our readers share with it.
	if _, err := l.Lock(ctx, name, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("our Lock under the recipe's reader = %v, want ErrNotAcquired", err)
	}
	r, err := l.RLock(ctx, name, lock.WithWait(0))
	if err != nil {
		t.Fatalf("our RLock beside the recipe's reader: %v", err)
	}
	info, err := l.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Readers) != 2 || info.Writer != nil {
		t.Fatalf("Inspect with the recipe's reader and ours = %+v", info)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rr.RUnlock(); err != nil {
		t.Fatal(err)
	}
	w, err = l.Lock(ctx, name, lock.WithWait(0))
	if err != nil {
		t.Fatalf("our Lock once both readers left: %v", err)
	}
	_ = w.Release(ctx)
}

func TestMain(m *testing.M) {
	rwlocktest.Child(rwTarget)
	os.Exit(m.Run())
}

// rwTarget opens a read-write Locker from "endpoint prefix", in this
// process and in the children of the process checks.
var rwTarget = rwlocktest.Target{
	Name: "etcd",
	Open: func(_ context.Context, config string) (*rwlock.Locker, error) {
		endpoint, prefix, _ := strings.Cut(config, " ")
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		return etcdlock.NewRW(c, etcdlock.WithPrefix(prefix))
	},
}

func TestRWProcesses(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	rwlocktest.RunProcesses(t, rwTarget, srv.Endpoint()+" "+testsvc.KeyPrefix(t))
}
