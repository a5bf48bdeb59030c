package deduptest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// ErrorLog collects the errors a broker adapter's consumer reports; pass its
// Add as the consumer's error handler.
type ErrorLog struct {
	mu   sync.Mutex
	errs []error
}

// Add records err.
func (l *ErrorLog) Add(_ context.Context, err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

// Errors returns the recorded errors, oldest first.
func (l *ErrorLog) Errors() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// Count returns how many recorded errors match target with errors.Is.
func (l *ErrorLog) Count(target error) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, err := range l.errs {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

// RunUntil runs run (a consumer's Run) until cond holds, checked every 10
// ms, failing t if it does not within 10 s; then it cancels run's context
// and fails t unless run returns context.Canceled within 5 s.
func RunUntil(t testing.TB, run func(context.Context) error, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			cancel()
			if err := <-done; err != nil {
				t.Logf("consumer: %v", err)
			}
			t.Fatal("condition not reached within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop within 5 s of cancel")
	}
}
