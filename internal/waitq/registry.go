package waitq

import "sync"

// A Waiter is the part of a contender of a queue-based backend (one per
// lock.Manager owner, from its first attempt until it is released, lost or
// withdrawn) that a waiting Acquire shares with the goroutines watching for
// its turn. Backends embed it in their contender; the zero value belongs to
// an Acquire that does not wait.
type Waiter struct {
	wake Wake           // nil unless queued
	wg   sync.WaitGroup // the contender's goroutines
}

func (w *Waiter) waiter() *Waiter { return w }

// Queued reports whether the contender is a waiting Acquire's (registered
// by Registry.Wait): its place stays in the queue between attempts.
// Otherwise a failed attempt withdraws it at once.
func (w *Waiter) Queued() bool { return w.wake != nil }

// Signal wakes the waiting Acquire to try again. Signals sent before it
// looks coalesce into one; a contender that does not wait ignores them.
func (w *Waiter) Signal() { w.wake.Signal() }

// Go runs f in a goroutine of the contender's, which the stop returned by
// Registry.Wait waits for: f must return once its watch is stopped.
func (w *Waiter) Go(f func()) { w.wg.Go(f) }

// A Contender is a pointer to a backend's contender type, which embeds a
// Waiter.
type Contender interface {
	comparable
	waiter() *Waiter
}

// A Registry maps each lock.Manager owner to its contender. The zero value
// is empty and ready for use; it is safe for concurrent use.
type Registry[C Contender] struct {
	mu sync.Mutex
	m  map[string]C // guarded by mu
}

// Get returns owner's contender, or the zero C (nil) if it has none.
func (r *Registry[C]) Get(owner string) C {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[owner]
}

// GetOrAdd returns owner's contender, adding fresh() if it has none.
func (r *Registry[C]) GetOrAdd(owner string, fresh func() C) C {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.m[owner]
	if !ok {
		c = fresh()
		r.put(owner, c)
	}
	return c
}

func (r *Registry[C]) put(owner string, c C) {
	if r.m == nil {
		r.m = map[string]C{}
	}
	r.m[owner] = c
}

// Forget removes c as owner's contender, unless another has taken its place.
func (r *Registry[C]) Forget(owner string, c C) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[owner] == c {
		delete(r.m, owner)
	}
}

// Take removes owner's contender and returns it, or the zero C (nil) if it
// has none.
func (r *Registry[C]) Take(owner string) C {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.m[owner]
	delete(r.m, owner)
	return c
}

// Wait makes c, a new contender, owner's contender for a waiting Acquire,
// for driver.ServerQueue's WatchReleaseOwner: it returns the channel Signal
// wakes, and the stop that ends the wait. stop calls leave with mu, c's own
// mutex, held: leave stops c's watches and withdraws its place unless it
// holds the lock, and reports whether it does. A contender that does not
// hold is forgotten. stop returns once c's goroutines have.
func (r *Registry[C]) Wait(owner string, c C, mu sync.Locker, leave func() (held bool)) (<-chan struct{}, func()) {
	w := c.waiter()
	w.wake = NewWake()
	r.mu.Lock()
	r.put(owner, c)
	r.mu.Unlock()
	stop := func() {
		mu.Lock()
		held := leave()
		mu.Unlock()
		if !held {
			r.Forget(owner, c)
		}
		w.wg.Wait()
	}
	return w.wake, stop
}

// Rename makes c, owner's contender, newOwner's instead, and reports
// whether it was owner's.
func (r *Registry[C]) Rename(owner, newOwner string, c C) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[owner] != c {
		return false
	}
	delete(r.m, owner)
	r.put(newOwner, c)
	return true
}
