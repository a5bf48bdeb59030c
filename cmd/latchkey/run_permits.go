package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
	"github.com/latchkey-go/latchkey/semaphore"
)

// runWithPermit is "latchkey run --permits N": argv runs under one of the
// N permits of the semaphore key on backend, with run's exit statuses.
func runWithPermit(ctx context.Context, backend, key string, permits int, opts []lock.Option, argv []string, grace time.Duration, stderr io.Writer) int {
	sems, err := lockurl.OpenSemaphores(ctx, backend)
	if err != nil {
		return usageOrUnavailable("latchkey run", err, stderr, lock.ErrInvalid)
	}
	defer sems.Close()
	sem, err := sems.Semaphore(key, permits)
	if err != nil {
		fmt.Fprintf(stderr, "latchkey run: %v\n", err)
		return exitUsage
	}
	permit, err := sem.Acquire(ctx, opts...)
	if errors.Is(err, semaphore.ErrMismatch) {
		fmt.Fprintf(stderr, "latchkey run: %v (every host must give the same --permits)\n", err)
		return exitUsage
	}
	if err != nil {
		return acquireFailed(ctx, err, fmt.Sprintf("all %d permits held elsewhere", permits), "a permit", stderr)
	}
	code := supervise(permit.Lease, key, argv, grace, "latchkey run", stderr)

	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := permit.Release(rctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
		fmt.Fprintf(stderr, "latchkey run: release: %v (the permit expires after its TTL)\n", err)
	}
	return code
}
