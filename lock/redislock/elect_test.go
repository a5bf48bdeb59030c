package redislock

import (
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/elect/electtest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// TestElection runs the election suite against the shared Redis: terms,
// Proclaim (one script that keeps the lock's expiry), and observers woken by
// the release channel.
func TestElection(t *testing.T) {
	addr, prefix, _ := sharedRedis(t)
	electtest.Run(t, electtest.Harness{
		New: func(t *testing.T) lock.Locker {
			return newLocker(t, newClient(t, addr), WithPrefix(prefix))
		},
	})
}

// TestObserverThroughAnOutage: with Redis down, an observer that kept showing
// the last leader would show a leader that may have lost its term long ago.
// It must say, within about a TTL, that who leads is unknown, with the
// reason, and show the leader again once Redis answers.
func TestObserverThroughAnOutage(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartRedis(t)
	const ttl = 2 * time.Second
	leader, err := elect.New(newLocker(t, newClient(t, srv.Addr())), "outage", elect.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := elect.New(newLocker(t, newClient(t, srv.Addr())), "outage", elect.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Campaign(ctxT(t), "host-a"); err != nil {
		t.Fatal(err)
	}
	ch, err := watcher.Observe(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) elect.Leader {
		t.Helper()
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("observer closed, waiting for %s", what)
			}
			return l
		case <-time.After(5 * ttl):
			t.Fatalf("no %s within %v", what, 5*ttl)
			return elect.Leader{}
		}
	}
	if l := next("first leader"); !l.Elected || l.Value != "host-a" {
		t.Fatalf("first delivery %+v, want host-a", l)
	}
	srv.Stop()
	stopped := time.Now()
	l := next("word of the outage")
	t.Logf("%v after Redis stopped: %+v", time.Since(stopped).Round(time.Millisecond), l)
	if !l.Unknown || l.Err == nil || l.Elected || l.Value != "" {
		t.Fatalf("during the outage the observer delivered %+v, want Unknown with an error", l)
	}
	srv.Start() // empty: the old term is gone with the data
	if _, err := leader.Campaign(ctxT(t), "host-b"); err != nil {
		t.Fatal(err)
	}
	for {
		l := next("the leader after the outage")
		if l.Unknown {
			t.Fatalf("a second Unknown without a confirmed leader between: %+v", l)
		}
		if l.Elected && l.Value == "host-b" {
			break
		}
	}
}
