package suitekit

import (
	"context"
	"io"
	"testing"
	"time"
)

// Cases are a suite's checks, each a name and the function that runs it;
// a case without a function is left out.
type Cases []struct {
	Name string
	Run  func(*testing.T)
}

// RunParallel runs each case as a parallel subtest of t.
func (cases Cases) RunParallel(t *testing.T) {
	for _, c := range cases {
		if c.Run == nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			c.Run(t)
		})
	}
}

// Made returns l, a Locker or Client a harness's New made for t, and
// closes it when t ends if it is an io.Closer; it fails t if l is nil.
func Made[T comparable](t testing.TB, l T) T {
	t.Helper()
	var none T
	if l == none {
		t.Fatal("Harness.New returned nil")
	}
	if c, ok := any(l).(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return l
}

// A Hold is what a holder has while a lock is held: a lock.Lease or a
// semaphore.Permit.
type Hold interface {
	Done() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
}

// Release releases h, failing t if it cannot within a minute.
func Release(t testing.TB, h Hold) {
	t.Helper()
	if err := h.Release(Context(t, time.Minute)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// WaitDone fails t unless h's Done closes within the given time.
func WaitDone(t testing.TB, h Hold, within time.Duration) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(within):
		t.Fatalf("Done not closed within %v", within)
	}
}

// NotDone fails t if h has been lost.
func NotDone(t testing.TB, h Hold) {
	t.Helper()
	select {
	case <-h.Done():
		t.Fatalf("%T lost unexpectedly: %v", h, h.Err())
	default:
	}
}
