package redlock

import "sync"

// maxIdleWorkers bounds the goroutines a crew keeps waiting between rounds;
// a worker that finds that many idle exits instead of waiting.
const maxIdleWorkers = 256

// A crew runs the per-node calls of a Locker's rounds on goroutines it keeps
// between rounds, instead of on new goroutines each time. A new goroutine
// starts on a small stack, which a go-redis call grows by copying, several
// times over: a sixth of the client's CPU in a profile of lock/unlock pairs.
// A kept goroutine has grown its stack already.
type crew struct {
	mu      sync.Mutex
	idle    []chan func() // each idle worker's inbox; guarded by mu
	closed  bool          // guarded by mu
	started int           // workers started so far; guarded by mu
}

// run calls f on an idle worker, or on a new one if none is idle.
func (c *crew) run(f func()) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		inbox := c.idle[n-1]
		c.idle[n-1] = nil
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		inbox <- f
		return
	}
	c.started++
	c.mu.Unlock()
	go c.work(f)
}

// work runs f, then waits idle for more until the crew is closed or has
// enough idle workers.
func (c *crew) work(f func()) {
	inbox := make(chan func(), 1)
	for {
		f()
		c.mu.Lock()
		if c.closed || len(c.idle) >= maxIdleWorkers {
			c.mu.Unlock()
			return
		}
		c.idle = append(c.idle, inbox)
		c.mu.Unlock()
		var ok bool
		if f, ok = <-inbox; !ok {
			return
		}
	}
}

// close ends the idle workers; busy ones end when their call returns. Calls
// made after close still run, each on a goroutine of its own.
func (c *crew) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, inbox := range c.idle {
		close(inbox)
	}
	c.idle = nil
}
