package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/elect/electtest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

func TestElection(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	admin := newClient(t, srv)
	electtest.Run(t, electtest.Harness{
		New:   func(t *testing.T) lock.Locker { return newLocker(t, newClient(t, srv)) },
		Break: func(t *testing.T, name string) { revoke(t, admin, name) },
		// etcd grants leases in whole seconds, at least 2 s by default.
		TTL:    2 * time.Second,
		Queued: true,
	})
}

// startEtcdctlElect runs `etcdctl elect args...` against srv in the
// background, as startEtcdctl does.
func startEtcdctlElect(t *testing.T, srv *testsvc.EtcdServer, args ...string) *etcdctl {
	t.Helper()
	return startEtcdctl(t, srv, append([]string{"elect"}, args...)...)
}

// resign makes a campaigning etcdctl resign and exit (it does on SIGTERM).
func (e *etcdctl) resign(t *testing.T) {
	t.Helper()
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("etcdctl elect did not exit after SIGTERM; stderr %q", e.errb.String())
	}
}

// TestInteropEtcdctlElect: `etcdctl elect` and `etcdctl elect -l` see and
// respect latchkey's leaders, and latchkey sees and respects etcdctl's.
func TestInteropEtcdctlElect(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "etcdctl-elect-" + testsvc.KeyPrefix(t)
	e, err := elect.New(newLocker(t, newClient(t, srv)), name, elect.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ours leads", func(t *testing.T) { etcdctlFollowsOurLeader(ctx, t, srv, e, name) })
	t.Run("theirs leads", func(t *testing.T) { weFollowEtcdctlsLeader(ctx, t, srv, e, name) })
}

// etcdctlFollowsOurLeader: while we lead, `etcdctl elect -l` shows our
// leader and proclaimed value and `etcdctl elect` waits; once we resign,
// etcdctl is elected and shown.
func etcdctlFollowsOurLeader(ctx context.Context, t *testing.T, srv *testsvc.EtcdServer, e *elect.Election, name string) {
	term, err := e.Campaign(ctx, "ours-1")
	if err != nil {
		t.Fatal(err)
	}
	observer := startEtcdctlElect(t, srv, "-l", name)
	if !observer.waitOutput("ours-1", 5*time.Second) {
		t.Fatalf("etcdctl elect -l did not show our leader; output %q, stderr %q", observer.out.String(), observer.errb.String())
	}
	theirs := startEtcdctlElect(t, srv, name, "theirs")
	if err := term.Proclaim(ctx, "ours-2"); err != nil {
		t.Fatal(err)
	}
	if !observer.waitOutput("ours-2", 5*time.Second) {
		t.Fatalf("etcdctl elect -l did not show our proclaimed value; output %q", observer.out.String())
	}
	if strings.Contains(theirs.out.String(), "theirs") {
		t.Fatalf("etcdctl elect was elected while we led: %q", theirs.out.String())
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !theirs.waitOutput("theirs", 5*time.Second) {
		t.Fatalf("etcdctl elect not elected within 5 s of our Resign; stderr %q", theirs.errb.String())
	}
	if !observer.waitOutput("theirs", 5*time.Second) {
		t.Fatalf("etcdctl elect -l did not show etcdctl's leader; output %q", observer.out.String())
	}
	theirs.resign(t)
}

// weFollowEtcdctlsLeader: while `etcdctl elect` leads, our Leader and
// Observe show its leader and our Campaign waits; once it resigns, we are
// elected with a higher token, and Observe shows no leader in between.
func weFollowEtcdctlsLeader(ctx context.Context, t *testing.T, srv *testsvc.EtcdServer, e *elect.Election, name string) {
	theirs := startEtcdctlElect(t, srv, name, "etcdctl-leader")
	if !theirs.waitOutput("etcdctl-leader", 5*time.Second) {
		t.Fatalf("etcdctl elect not elected; stderr %q", theirs.errb.String())
	}
	l, err := e.Leader(ctx)
	if err != nil || l.Value != "etcdctl-leader" || !strings.HasPrefix(l.Entry, name+"/") {
		t.Fatalf("Leader = %+v, %v; want etcdctl's", l, err)
	}
	if _, err := e.Campaign(ctx, "ours", elect.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-once Campaign while etcdctl leads: %v, want ErrNotAcquired", err)
	}
	obs, err := e.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-obs; got.Value != "etcdctl-leader" {
		t.Fatalf("first observed %+v, want etcdctl's leader", got)
	}
	got := make(chan error, 1)
	var term *elect.Term
	go func() {
		var err error
		term, err = e.Campaign(ctx, "ours")
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err, ok := received(got); ok {
		t.Fatalf("Campaign returned (%v) while etcdctl led", err)
	}
	theirs.resign(t)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)
	if term.Token() <= l.Token {
		t.Fatalf("our token %d is not above etcdctl's term's %d", term.Token(), l.Token)
	}
	for o := range obs {
		if o.Elected && o.Value == "ours" {
			break
		}
		if o.Elected {
			t.Fatalf("observed %+v between etcdctl's leader and ours", o)
		}
	}
}

// TestInteropGoElection: etcd's concurrency.Election and latchkey share an
// election, both ways: campaigns exclude each other, Leader and Observe
// of each show the other's leader and proclaimed values.
func TestInteropGoElection(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := "go-election-" + testsvc.KeyPrefix(t)
	newElection := func() *concurrency.Election {
		return concurrency.NewElection(newSession(t, srv, concurrency.WithTTL(5)), name)
	}
	ours, err := elect.New(newLocker(t, newClient(t, srv)), name, elect.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	goElectionLeads(ctx, t, ours, newElection())
	term, err := ours.Campaign(ctx, "ours-1")
	if err != nil {
		t.Fatal(err)
	}
	other := newElection()
	weLeadGoElection(ctx, t, term, other)
	g, err := newClient(t, srv).Get(ctx, name+"/", clientv3.WithPrefix())
	if err != nil || len(g.Kvs) != 1 {
		t.Fatalf("keys under the election after our Resign: %v, %v; want theirs alone", g, err)
	}
	_ = other.Resign(ctx)
}

// goElectionLeads: while theirs leads, our Leader and Observe show its
// leader and proclaimed value in its term, and our try-once Campaign is
// refused; then theirs resigns.
func goElectionLeads(ctx context.Context, t *testing.T, ours *elect.Election, theirs *concurrency.Election) {
	t.Helper()
	if err := theirs.Campaign(ctx, "go-1"); err != nil {
		t.Fatal(err)
	}
	if l, err := ours.Leader(ctx); err != nil || l.Value != "go-1" || l.Token != uint64(theirs.Rev()) {
		t.Fatalf("our Leader = %+v, %v; want go-1 at revision %d", l, err, theirs.Rev())
	}
	obs, err := ours.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o := <-obs; o.Value != "go-1" {
		t.Fatalf("first observed %+v", o)
	}
	if err := theirs.Proclaim(ctx, "go-2"); err != nil {
		t.Fatal(err)
	}
	if o := <-obs; o.Value != "go-2" || o.Token != uint64(theirs.Rev()) {
		t.Fatalf("observed %+v after their Proclaim, want go-2 in the same term", o)
	}
	if _, err := ours.Campaign(ctx, "ours", elect.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-once Campaign while Go's Election leads: %v", err)
	}
	if err := theirs.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// weLeadGoElection: while term leads, other's Leader and Observe show our
// leader and proclaimed value in our term, and other's Campaign waits;
// once we resign, other is elected and its Observe shows it.
func weLeadGoElection(ctx context.Context, t *testing.T, term *elect.Term, other *concurrency.Election) {
	t.Helper()
	l, err := other.Leader(ctx)
	if err != nil || string(l.Kvs[0].Value) != "ours-1" {
		t.Fatalf("their Leader = %v, %v; want ours-1", l, err)
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	theirObs := other.Observe(octx)
	if r := <-theirObs; string(r.Kvs[0].Value) != "ours-1" {
		t.Fatalf("their Observe first showed %q", r.Kvs[0].Value)
	}
	campaigned := make(chan error, 1)
	go func() { campaigned <- other.Campaign(ctx, "go-3") }()
	if err := term.Proclaim(ctx, "ours-2"); err != nil {
		t.Fatal(err)
	}
	if r := <-theirObs; string(r.Kvs[0].Value) != "ours-2" || r.Kvs[0].CreateRevision != int64(term.Token()) {
		t.Fatalf("their Observe showed %q (revision %d) after our Proclaim", r.Kvs[0].Value, r.Kvs[0].CreateRevision)
	}
	if err, ok := received(campaigned); ok {
		t.Fatalf("their Campaign returned (%v) while we led", err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-campaigned; err != nil {
		t.Fatal(err)
	}
	if r := <-theirObs; string(r.Kvs[0].Value) != "go-3" {
		t.Fatalf("their Observe showed %q after our Resign", r.Kvs[0].Value)
	}
}

// TestElectionClusterLeaderKilled leads an election on a 3-member cluster
// with a second candidate waiting, and kills the etcd leader (SIGKILL). The
// term survives or ends (Done), never two leaders: when the second
// candidate is elected, the first term's Done is already closed, and its
// token is higher.
func TestElectionClusterLeaderKilled(t *testing.T) {
	c := testsvc.StartEtcdCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	name := "cluster-elect-" + testsvc.KeyPrefix(t)
	const ttl = 3 * time.Second
	eps := c.Endpoints()
	newElection := func(endpoints []string) *elect.Election {
		e, err := elect.New(newLocker(t, newClientAt(t, endpoints)), name, elect.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := newElection(eps), newElection([]string{eps[2], eps[1], eps[0]})
	ta, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	elected := make(chan *elect.Term, 1)
	go func() {
		for ctx.Err() == nil {
			tb, err := b.Campaign(ctx, "b")
			if err == nil {
				elected <- tb
				return
			}
			time.Sleep(100 * time.Millisecond) // the cluster is electing
		}
		close(elected)
	}()
	time.Sleep(300 * time.Millisecond)
	killedAt := killLeader(ctx, t, c)
	select {
	case tb := <-elected:
		if tb == nil {
			t.Fatal("b never elected")
		}
		select {
		case <-ta.Done():
		default:
			t.Fatalf("b elected %v after the kill while a's term was open: two leaders", time.Since(killedAt))
		}
		if tb.Token() <= ta.Token() {
			t.Fatalf("b's token %d is not above a's %d", tb.Token(), ta.Token())
		}
		t.Logf("a's term ended (%v); b elected %v after the kill", ta.Err(), time.Since(killedAt))
		_ = tb.Resign(ctx)
	case <-time.After(3 * ttl):
		// The term survived the leader's death: a still leads.
		select {
		case <-ta.Done():
			t.Fatalf("a's term ended (%v) but b was not elected within %v", ta.Err(), 3*ttl)
		default:
		}
		t.Log("a's term survived the etcd leader's death")
		if err := ta.Resign(ctx); err != nil {
			t.Fatalf("Resign of a surviving term: %v", err)
		}
		if tb := <-elected; tb == nil || tb.Token() <= ta.Token() {
			t.Fatalf("after a resigned, b: %v", tb)
		} else {
			_ = tb.Resign(ctx)
		}
	}
}
