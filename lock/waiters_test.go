package lock

import "testing"

// TestWaiters checks the queue without a server: arrival order, only the
// head attempts, a head that leaves without the lock passes its turn on,
// one that took it does not, and releases alternate between a direct
// hand-off and the backend's hint.
func TestWaiters(t *testing.T) {
	ws := waiters{fifo: true}
	a, b, c := ws.join("k", "", 0), ws.join("k", "", 0), ws.join("k", "", 0)
	other := ws.join("other", "", 0)
	if ws.behind(a) || !ws.behind(b) || !ws.behind(c) || ws.behind(other) {
		t.Fatal("only the first waiter of each key may attempt")
	}
	if n := ws.waiting("k"); n != 3 {
		t.Fatalf("waiting = %d, want 3", n)
	}
	pending := func(w *waiter) bool {
		select {
		case <-w.turn:
			return true
		default:
			return false
		}
	}
	ws.wakeHead("k")
	if !pending(a) || pending(b) || pending(c) {
		t.Fatal("a release must wake the head only")
	}
	ws.leave(a) // cancelled: b's turn
	if !pending(b) || pending(c) || ws.behind(b) {
		t.Fatal("the departed head's turn was not passed on")
	}
	ws.acquired(b)
	ws.leave(b) // took the lock: c is head, woken only by the release
	if pending(c) || ws.behind(c) {
		t.Fatal("after an acquisition the next waiter is head, not woken")
	}
	if !ws.handOff("k") || ws.handOff("k") || !ws.handOff("k") {
		t.Fatal("direct hand-offs do not alternate with the release hint")
	}
	ws.leave(c)
	ws.leave(other)
	if ws.waiting("k") != 0 || ws.waiting("other") != 0 || len(ws.handoffs) != 0 || ws.n.Load() != 0 {
		t.Fatalf("queues left behind: %v", ws.handoffs)
	}
	if ws.handOff("k") {
		t.Fatal("a hand-off with nobody waiting")
	}
}

// TestWaitersShared checks that on a key several owners may hold, a waiter
// that took it wakes the next, which may find more of it free, while on
// other keys it does not.
func TestWaitersShared(t *testing.T) {
	ws := waiters{fifo: true, shared: func(key string) bool { return key == "shared" }}
	for _, c := range []struct {
		key  string
		wake bool
	}{{"shared", true}, {"plain", false}} {
		a, b := ws.join(c.key, "", 0), ws.join(c.key, "", 0)
		ws.acquired(a)
		ws.leave(a)
		select {
		case <-b.turn:
			if !c.wake {
				t.Fatalf("%s: an acquisition woke the next waiter", c.key)
			}
		default:
			if c.wake {
				t.Fatalf("%s: an acquisition did not wake the next waiter", c.key)
			}
		}
		ws.leave(b)
	}
}
