package redlock

import (
	"runtime"
	"sync"
	"testing"
)

// TestCrew checks that a crew keeps its workers between calls instead of
// starting new ones, runs concurrent calls on workers of their own, and
// after close still runs calls but keeps no worker.
func TestCrew(t *testing.T) {
	var c crew
	state := func() (idle, started int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.idle), c.started
	}
	waitIdle := func(n int) {
		for idle, _ := state(); idle < n; idle, _ = state() {
			runtime.Gosched()
		}
	}
	var wg sync.WaitGroup
	call := func(f func()) {
		wg.Add(1)
		c.run(func() { defer wg.Done(); f() })
	}

	ran := 0
	for range 50 {
		call(func() { ran++ })
		wg.Wait()
		waitIdle(1)
	}
	if _, started := state(); ran != 50 || started != 1 {
		t.Fatalf("50 calls one after the other ran %d times on %d workers; want 50 on 1", ran, started)
	}

	// Three calls that wait for each other need three workers.
	gate := make(chan struct{})
	for range 3 {
		call(func() { <-gate })
	}
	close(gate)
	wg.Wait()
	waitIdle(3)
	if idle, started := state(); idle != 3 || started != 3 {
		t.Fatalf("3 concurrent calls left %d workers idle of %d started; want 3 of 3", idle, started)
	}

	c.close()
	if idle, _ := state(); idle != 0 {
		t.Fatalf("%d workers idle after close", idle)
	}
	done := false
	call(func() { done = true })
	wg.Wait()
	if !done {
		t.Fatal("a call after close did not run")
	}
	runtime.Gosched()
	if idle, _ := state(); idle != 0 {
		t.Fatal("a worker went idle after close")
	}
}
