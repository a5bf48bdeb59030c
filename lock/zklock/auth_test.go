package zklock_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

// authConn is a plain client authenticated with digest user:password, or
// not at all when creds is "".
func authConn(t *testing.T, srv *testsvc.ZooKeeperServer, creds string) *zk.Conn {
	t.Helper()
	c := plainConn(t, srv)
	if creds != "" {
		if err := c.AddAuth("digest", []byte(creds)); err != nil {
			t.Fatalf("AddAuth: %v", err)
		}
	}
	return c
}

// On an ensemble anyone on the network can reach, a lock taken with digest
// credentials is its holder's identity's alone: a client without them, or
// with a wrong password, can neither delete the held lock's node, rewrite
// it, nor take the lock; a Locker with the same credentials contends as
// usual, and the holder's lease is never lost.
func TestDigestAuthKeepsOthersOffHeldLocks(t *testing.T) {
	srv := startZK(t)
	ctx := t.Context()
	alice := newLocker(t, srv, zklock.WithDigestAuth("alice", "s3cret"), zklock.WithPrefix("/secure"))
	lease, err := alice.Acquire(ctx, "acct-1", lock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("Acquire with credentials: %v", err)
	}
	defer lease.Release(ctx)

	anon := authConn(t, srv, "")
	nodes, _, err := anon.Children("/secure/acct-1")
	if !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("a client without credentials listed the lock's nodes: %v, %v", nodes, err)
	}
	owner := authConn(t, srv, "alice:s3cret")
	nodes, _, err = owner.Children("/secure/acct-1")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("the holder's identity sees %v, %v; want its one node", nodes, err)
	}
	node := "/secure/acct-1/" + nodes[0]
	for name, c := range map[string]*zk.Conn{"no credentials": anon, "a wrong password": authConn(t, srv, "alice:guess")} {
		if err := c.Delete(node, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("a client with %s deleted the held lock's node: %v", name, err)
		}
		if _, err := c.Set(node, []byte("mine now"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("a client with %s rewrote the held lock's node: %v", name, err)
		}
	}

	stranger := newLocker(t, srv, zklock.WithPrefix("/secure"))
	if _, err := stranger.Acquire(ctx, "acct-1", lock.WithWait(0)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a Locker without credentials: %v, want an error wrapping zk.ErrNoAuth", err)
	}
	wrong := newLocker(t, srv, zklock.WithDigestAuth("alice", "guess"), zklock.WithPrefix("/secure"))
	if _, err := wrong.Acquire(ctx, "acct-1", lock.WithWait(0)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a Locker with a wrong password: %v, want an error wrapping zk.ErrNoAuth", err)
	}
	colleague := newLocker(t, srv, zklock.WithDigestAuth("alice", "s3cret"), zklock.WithPrefix("/secure"))
	if _, err := colleague.Acquire(ctx, "acct-1", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("a Locker with the same credentials: %v, want lock.ErrNotAcquired while alice holds it", err)
	}
	select {
	case <-lease.Done():
		t.Fatalf("the holder's lease was lost: %v", lease.Err())
	default:
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next, err := colleague.Acquire(ctx, "acct-1", lock.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("the colleague after the release: %v", err)
	}
	if next.Token() <= lease.Token() {
		t.Errorf("token %d after %d", next.Token(), lease.Token())
	}
	_ = next.Release(ctx)
}

func TestDigestAuthOptionsRefuseBadInput(t *testing.T) {
	for name, opts := range map[string][]zklock.Option{
		"an empty user":      {zklock.WithDigestAuth("", "pw")},
		"a user with ':'":    {zklock.WithDigestAuth("a:b", "pw")},
		"an empty ACL":       {zklock.WithACL([]zk.ACL{})},
		"auth ACL, no creds": {zklock.WithACL(zk.AuthACL(zk.PermAll))},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second) // a missed check would dial forever
		l, err := zklock.New(ctx, []string{"127.0.0.1:1"}, opts...)
		cancel()
		if l != nil {
			_ = l.Close()
		}
		if !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s: %v, want lock.ErrInvalid before any connection", name, err)
		}
	}
}

// kazooAuthScript tries to take a lock with kazoo, authenticated as
// argv[3] (or not at all when it is ""), and prints what happened.
const kazooAuthScript = `
import sys, logging
logging.basicConfig(level=logging.CRITICAL)
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, LockTimeout
auth = [("digest", sys.argv[3])] if sys.argv[3] else None
zk = KazooClient(hosts=sys.argv[1], timeout=5, auth_data=auth)
zk.start(timeout=10)
lk = zk.Lock(sys.argv[2], identifier="kazoo")
try:
    print("got" if lk.acquire(timeout=1.5) else "busy", flush=True)
except LockTimeout:
    print("busy", flush=True)
except NoAuthError:
    print("noauth", flush=True)
zk.stop(); zk.close()
`

// kazoo with the same digest credentials contends for a lock latchkey
// holds (and waits: busy); kazoo without them is refused by the ACL.
func TestDigestAuthWithKazoo(t *testing.T) {
	needKazoo(t)
	srv := startZK(t)
	ours := newLocker(t, srv, zklock.WithDigestAuth("alice", "s3cret"), zklock.WithPrefix("/locks"), zklock.WithNodeNames(zklock.KazooNames))
	lease, err := ours.Acquire(t.Context(), "shared", lock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(t.Context())
	for creds, want := range map[string]string{"alice:s3cret": "busy", "": "noauth", "alice:guess": "noauth"} {
		out, err := exec.Command(python, "-c", kazooAuthScript, srv.Endpoint(), "/locks/shared", creds).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != want {
			t.Errorf("kazoo with credentials %q: %q, %v; want %q", creds, got, err, want)
		}
	}
}

// Curator with the same digest credentials and CREATOR_ALL ACLs shares a
// lock with latchkey both ways; its nodes, like ours, are its identity's
// alone; Curator without the credentials cannot even queue.
func TestDigestAuthWithCurator(t *testing.T) {
	compiled := compileCurator(t)
	srv := startZK(t)
	const dir = "/curator/shared"
	ours := newLocker(t, srv, zklock.WithDigestAuth("alice", "s3cret"), zklock.WithPrefix("/curator"))
	lease, err := ours.Acquire(t.Context(), "shared", lock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	java, classes := compiled()
	cur := startCuratorMain(t, java, classes, "CuratorLock", srv.Endpoint(), dir, "alice:s3cret")
	cur.send("try c1 300")
	cur.expect("busy", "c1")
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	cur.send("acquire c1")
	node, tok := cur.held("c1")
	if tok <= lease.Token() {
		t.Errorf("Curator's token %d is not above ours %d", tok, lease.Token())
	}
	if _, err := ours.Acquire(t.Context(), "shared", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("our try while Curator holds: %v, want ErrNotAcquired", err)
	}
	anon := authConn(t, srv, "")
	if err := anon.Delete(dir+"/"+node, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a client without the credentials deleted Curator's held node: %v", err)
	}
	if _, err := anon.Set(dir+"/"+node, []byte("forged"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a client without the credentials rewrote Curator's held node: %v", err)
	}

	stranger := startCuratorMain(t, java, classes, "CuratorLock", srv.Endpoint(), dir)
	stranger.send("try s1 300")
	if f := stranger.expect("error", "s1"); !strings.Contains(strings.Join(f, " "), "NoAuth") {
		t.Errorf("Curator without the credentials: %q, want ZooKeeper's NoAuth", f)
	}
	cur.send("release c1")
	cur.expect("released", "c1")
}
