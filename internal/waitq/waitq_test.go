package waitq

import (
	"sync"
	"sync/atomic"
	"testing"
)

type contender struct {
	Waiter
	mu   sync.Mutex
	name string
}

func TestRegistry(t *testing.T) {
	var r Registry[*contender]
	if r.Get("a") != nil {
		t.Fatal("an empty registry has a contender")
	}
	a := r.GetOrAdd("a", func() *contender { return &contender{name: "a"} })
	if again := r.GetOrAdd("a", func() *contender { t.Fatal("fresh called twice"); return nil }); again != a || r.Get("a") != a {
		t.Fatal("GetOrAdd did not keep the contender")
	}
	if a.Queued() {
		t.Error("a contender of GetOrAdd is queued")
	}
	a.Signal() // ignored: nobody waits
	r.Forget("a", &contender{})
	if r.Get("a") != a {
		t.Fatal("Forget removed another's place")
	}
	r.Forget("a", a)
	if r.Get("a") != nil {
		t.Fatal("Forget kept the contender")
	}
	b := r.GetOrAdd("b", func() *contender { return &contender{name: "b"} })
	if got := r.Take("b"); got != b || r.Get("b") != nil || r.Take("b") != nil {
		t.Fatal("Take did not remove the contender exactly once")
	}
}

func TestWait(t *testing.T) {
	var r Registry[*contender]
	for _, held := range []bool{false, true} {
		c := &contender{}
		wake, stop := r.Wait("o", c, &c.mu, func() bool {
			if c.mu.TryLock() {
				t.Error("leave called without the contender's mutex")
			}
			return held
		})
		if !c.Queued() || r.Get("o") != c {
			t.Fatal("Wait did not register a queued contender")
		}
		c.Signal()
		c.Signal() // coalesces
		<-wake
		select {
		case <-wake:
			t.Fatal("two signals woke twice")
		default:
		}
		quit := make(chan struct{})
		var ended atomic.Bool
		c.Go(func() { <-quit; ended.Store(true) })
		close(quit)
		stop()
		if !ended.Load() {
			t.Fatal("stop returned before the contender's goroutine")
		}
		if got := r.Get("o"); (got == c) != held {
			t.Fatalf("held %v: after stop the registry has %v", held, got)
		}
		r.Forget("o", c)
	}
}

// TestQueue checks that only the first to leave hands the turn on, to the
// next in arrival order, and that an emptied line leaves nothing behind.
func TestQueue(t *testing.T) {
	var q Queue[int]
	for w := range 3 {
		q.Join("k", w)
	}
	_, fromBehind := q.Leave("k", 1)
	next, fromFirst := q.Leave("k", 0)
	if _, fromLast := q.Leave("k", 2); fromBehind || !fromFirst || next != 2 || fromLast || len(q.lines) != 0 {
		t.Fatalf("turn handed on from behind %v, from the first %v to %d, from the last %v; lines left: %v", fromBehind, fromFirst, next, fromLast, q.lines)
	}
}

// TestWatchers checks that a notification wakes only its key's watchers,
// once however often it is sent, and that stopped watches leave nothing.
func TestWatchers(t *testing.T) {
	var ws Watchers
	a, stopA := ws.Watch("a")
	b, stopB := ws.Watch("b")
	ws.Notify("a")
	ws.Notify("a")
	if len(a) != 1 || len(b) != 0 || ws.Len("a") != 1 {
		t.Fatalf("after two notifications of a: %d wake-ups for a, %d for b, %d watching a", len(a), len(b), ws.Len("a"))
	}
	ws.NotifyAll()
	stopA()
	stopB()
	if len(b) != 1 || len(ws.keys) != 0 {
		t.Fatalf("NotifyAll left b with %d wake-ups; keys left: %v", len(b), ws.keys)
	}
}
