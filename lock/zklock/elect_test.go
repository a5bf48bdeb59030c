package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/elect/electtest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

func TestElection(t *testing.T) {
	srv := startZK(t)
	admin := plainConn(t, srv)
	electtest.Run(t, electtest.Harness{
		New:    func(t *testing.T) lock.Locker { return newLocker(t, srv) },
		Break:  func(t *testing.T, name string) { revoke(t, admin, zklock.DefaultPrefix+"/"+name) },
		TTL:    time.Second, // a loaded JVM can take 100s of ms to answer
		Queued: true,
	})
}

// campaigned is the outcome of a Campaign run in the background.
type campaigned struct {
	term *elect.Term
	err  error
}

// campaignAsync runs a waiting Campaign for value in the background.
func campaignAsync(ctx context.Context, e *elect.Election, value string) <-chan campaigned {
	ch := make(chan campaigned, 1)
	go func() {
		term, err := e.Campaign(ctx, value)
		ch <- campaigned{term, err}
	}()
	return ch
}

// kazooElection drives a kazoo Election, one command per line on stdin:
// "run" campaigns in a thread (it prints "leading" once elected), "resign"
// ends its leadership ("resigned"), "contenders" prints the identifiers in
// queue order.
const kazooElection = `
import sys, logging, threading
logging.basicConfig(level=logging.ERROR)
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=5)
zk.start(timeout=10)
el = zk.Election(sys.argv[2], sys.argv[3])
stop = threading.Event()
def lead():
    print("leading", flush=True)
    stop.wait()
def campaign():
    el.run(lead)
    print("resigned", flush=True)
print("ready", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "run":
        stop.clear()
        threading.Thread(target=campaign, daemon=True).start()
    elif cmd == "resign":
        stop.set()
    elif cmd == "contenders":
        print("contenders " + ",".join(el.contenders()), flush=True)
zk.stop(); zk.close()
`

// TestKazooElection: kazoo's Election (kazoo's Lock with the candidate's
// identifier as node data) and ours share an election on one path, both
// ways: each respects the other's leader, sees its value, and takes over
// at its resign.
func TestKazooElection(t *testing.T) {
	srv := startZK(t)
	ctx := t.Context()
	ours, err := elect.New(newLocker(t, srv, zklock.WithPrefix("/elections"), zklock.WithNodeNames(zklock.KazooNames)),
		"shared", elect.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	kazoo := startKazoo(t, kazooElection, srv.Endpoint(), "/elections/shared", "kazoo-leader")
	kazoo.expect("ready")

	// kazoo leads.
	kazoo.send("run")
	kazoo.expect("leading")
	l, err := ours.Leader(ctx)
	if err != nil || l.Value != "kazoo-leader" {
		t.Fatalf("our Leader = %+v, %v; want kazoo's", l, err)
	}
	if _, err := ours.Campaign(ctx, "ours", elect.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-once Campaign while kazoo leads: %v", err)
	}
	got := campaignAsync(ctx, ours, "ours")
	waitContenders := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			kazoo.send("contenders")
			c := kazoo.next("contenders", 30*time.Second)
			if c == "contenders "+want {
				return
			}
			if !strings.HasPrefix(c, "contenders ") || time.Now().After(deadline) {
				t.Fatalf("kazoo sees %q, want contenders %s", c, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitContenders("kazoo-leader,ours")
	kazoo.send("resign")
	kazoo.expect("resigned")
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.term.Token() <= l.Token {
		t.Fatalf("our token %d is not above kazoo's term's %d", r.term.Token(), l.Token)
	}

	// Ours leads.
	kazoo.send("run")
	kazoo.quiet(500*time.Millisecond, "while we led")
	waitContenders("ours,kazoo-leader")
	if err := r.term.Proclaim(ctx, "ours-2"); err != nil {
		t.Fatal(err)
	}
	waitContenders("ours-2,kazoo-leader")
	if err := r.term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	kazoo.expect("leading")
	if l, err := ours.Leader(ctx); err != nil || l.Value != "kazoo-leader" {
		t.Fatalf("our Leader after our Resign = %+v, %v; want kazoo's", l, err)
	}
}

// TestCuratorElection: Curator's LeaderSelector (whose nodes are
// InterProcessMutex's, the candidate's id as data: zklock's default
// CuratorNames layout) and ours share an election on one path, both ways.
func TestCuratorElection(t *testing.T) {
	compiled := compileCurator(t)
	srv := startZK(t)
	ctx := t.Context()
	ours, err := elect.New(newLocker(t, srv), "shared", elect.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	java, classes := compiled()
	cur := startCuratorMain(t, java, classes, "CuratorLeader", srv.Endpoint(), zklock.DefaultPrefix+"/shared", "curator-leader")
	participants := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			cur.send("participants")
			f := cur.expect("participants")
			got := ""
			if len(f) > 1 {
				got = f[1]
			}
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Curator's participants %q, want %q", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Curator leads.
	cur.send("start")
	cur.expect("leading")
	l, err := ours.Leader(ctx)
	if err != nil || l.Value != "curator-leader" {
		t.Fatalf("our Leader = %+v, %v; want Curator's", l, err)
	}
	if _, err := ours.Campaign(ctx, "ours", elect.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-once Campaign while Curator leads: %v", err)
	}
	got := campaignAsync(ctx, ours, "ours")
	participants("curator-leader,ours")
	cur.send("resign")
	cur.expect("resigned")
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.term.Token() <= l.Token {
		t.Fatalf("our token %d is not above Curator's term's %d", r.term.Token(), l.Token)
	}

	// Ours leads.
	cur.send("requeue")
	cur.quiet(500*time.Millisecond, "while we led")
	cur.send("leader")
	cur.expect("leader", "ours")
	participants("ours,curator-leader")
	if err := r.term.Proclaim(ctx, "ours-2"); err != nil {
		t.Fatal(err)
	}
	cur.send("leader")
	cur.expect("leader", "ours-2")
	if err := r.term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	cur.expect("leading")
	if l, err := ours.Leader(ctx); err != nil || l.Value != "curator-leader" {
		t.Fatalf("our Leader after our Resign = %+v, %v; want Curator's", l, err)
	}
	cur.send("resign")
	cur.expect("resigned")
}

// TestElectionSessionExpiry: the leader's session cannot be kept (the
// server is stopped past its 1 s session timeout): its term ends (Done),
// and the waiting candidate, once the server is back and the session
// expired, is elected with a higher token; never while the first term was
// open.
func TestElectionSessionExpiry(t *testing.T) {
	srv := testsvc.StartZooKeeper(t)
	ctx := t.Context()
	a, err := elect.New(newLocker(t, srv, zklock.WithSessionTimeout(time.Second)), "expiry", elect.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// b's session is short too: go-zookeeper gives a handshake ten times
	// two thirds of the session timeout, and a server that restarts under
	// load can accept a connection it never answers (33 s at 5 s).
	b, err := elect.New(newLocker(t, srv, zklock.WithSessionTimeout(2*time.Second)), "expiry", elect.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ta, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan campaigned, 1)
	go func() {
		for {
			tb, err := b.Campaign(ctx, "b")
			if err == nil || ctx.Err() != nil {
				got <- campaigned{tb, err}
				return
			}
			time.Sleep(100 * time.Millisecond) // no session while the server is down
		}
	}()
	time.Sleep(300 * time.Millisecond)
	srv.Stop()
	select {
	case <-ta.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the leader's Done not closed after its session could not be kept")
	}
	if !errors.Is(ta.Err(), lock.ErrLeaseLost) {
		t.Fatalf("a's Err = %v", ta.Err())
	}
	srv.Start()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.term.Token() <= ta.Token() {
			t.Fatalf("b's token %d is not above a's %d", r.term.Token(), ta.Token())
		}
		_ = r.term.Resign(ctx)
	case <-time.After(30 * time.Second):
		t.Fatal("b not elected after a's session expired")
	}
}
