package deduptest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
)

// Wrap puts next behind the deduplicator under test. It is called once per
// subtest; messages ids are unique per subtest.
type Wrap func(t *testing.T, next dedup.Handler) dedup.Handler

// RunHandler checks the guarantees of a deduplicating handler, whatever it is
// built on: a duplicate of a processed message is acknowledged without running
// the handler; a failed message is redelivered and processed; copies racing
// each other take effect once and none is acknowledged before the effect
// happened; under random failures and redeliveries every message takes effect
// exactly once and none is lost. Deliveries retry until [dedup.ShouldAck],
// waiting [dedup.RetryAfter] (capped at 20 ms) after an in-progress answer.
func RunHandler(t *testing.T, wrap Wrap) {
	t.Helper()
	for _, c := range handlerChecks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if err := c.fn(t, wrap); err != nil {
				t.Fatal(err)
			}
		})
	}
}

var handlerChecks = []struct {
	name string
	fn   func(*testing.T, Wrap) error
}{
	{"DuplicateSkipped", checkDuplicateSkipped},
	{"FailureRedelivered", checkFailureRedelivered},
	{"ConcurrentCopiesOnce", checkConcurrentCopies},
	{"RandomFailuresExactlyOnce", checkRandomFailures},
}

var errBoom = errors.New("deduptest: handler failed on purpose")

// deliver redelivers m until the wrapped handler's answer says acknowledge,
// and returns that answer.
func deliver(ctx context.Context, h dedup.Handler, m dedup.Message) error {
	for {
		err := h(ctx, m)
		if dedup.ShouldAck(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("message %q never acknowledged: %w", m.ID, err)
		}
		switch {
		case errors.Is(err, dedup.ErrInProgress):
			time.Sleep(min(max(dedup.RetryAfter(err), time.Millisecond), 20*time.Millisecond))
		case errors.Is(err, errBoom):
		default:
			return fmt.Errorf("message %q: unexpected error %w", m.ID, err)
		}
	}
}

func checkDuplicateSkipped(t *testing.T, wrap Wrap) error {
	ctx := ctxT(t)
	var calls atomic.Int32
	h := wrap(t, func(context.Context, dedup.Message) error { calls.Add(1); return nil })
	m := dedup.Message{ID: UniqueID(t), Body: []byte("pay 100")}
	for i := range 3 {
		if err := h(ctx, m); err != nil {
			return fmt.Errorf("delivery %d: %v, want nil (acknowledge)", i+1, err)
		}
	}
	if n := calls.Load(); n != 1 {
		return fmt.Errorf("handler ran %d times for 3 deliveries of one message, want 1", n)
	}
	return nil
}

// checkFailureRedelivered is the hole of the naive SET NX before the handler:
// there the failed message is lost.
func checkFailureRedelivered(t *testing.T, wrap Wrap) error {
	ctx := ctxT(t)
	var calls, effects atomic.Int32
	h := wrap(t, func(context.Context, dedup.Message) error {
		if calls.Add(1) == 1 {
			return errBoom
		}
		effects.Add(1)
		return nil
	})
	m := dedup.Message{ID: UniqueID(t)}
	err := h(ctx, m)
	if !errors.Is(err, errBoom) || dedup.ShouldAck(err) {
		return fmt.Errorf("failing handler: wrapper returned %v, want the handler's error and no ack", err)
	}
	if err := h(ctx, m); err != nil {
		return fmt.Errorf("redelivery after a failure: %v, want nil", err)
	}
	if err := h(ctx, m); err != nil {
		return fmt.Errorf("duplicate after the redelivery succeeded: %v, want nil", err)
	}
	if c, e := calls.Load(), effects.Load(); c != 2 || e != 1 {
		return fmt.Errorf("handler ran %d times with %d effects, want 2 runs (fail, succeed) and 1 effect: the failed message was lost", c, e)
	}
	return nil
}

// checkConcurrentCopies is the hole of marking ids only after the handler
// (two copies both run) and of acknowledging copies that find the id merely
// claimed (a copy is acked while the first may still fail).
func checkConcurrentCopies(t *testing.T, wrap Wrap) error {
	ctx := ctxT(t)
	var effects atomic.Int32
	h := wrap(t, func(context.Context, dedup.Message) error {
		time.Sleep(30 * time.Millisecond)
		effects.Add(1)
		return nil
	})
	m := dedup.Message{ID: UniqueID(t)}
	const copies = 16
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		early int
		errs  []error
	)
	start := make(chan struct{})
	for range copies {
		wg.Go(func() {
			<-start
			err := deliver(ctx, h, m)
			seen := effects.Load()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if seen == 0 {
				early++
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if n := effects.Load(); n != 1 {
		return fmt.Errorf("%d concurrent copies took effect %d times, want 1", copies, n)
	}
	if early > 0 {
		return fmt.Errorf("%d copies were acknowledged before the message took effect", early)
	}
	return nil
}

// checkRandomFailures delivers 200 messages once or twice each, in random
// order, from 8 consumers, with 30% of handler runs failing, and redelivers
// until acknowledged.
func checkRandomFailures(t *testing.T, wrap Wrap) error {
	ctx := ctxT(t)
	const msgs, workers = 200, 8
	effects := make([]atomic.Int32, msgs)
	h := wrap(t, func(_ context.Context, m dedup.Message) error {
		if rand.IntN(10) < 3 {
			return errBoom
		}
		if rand.IntN(4) == 0 {
			time.Sleep(time.Millisecond)
		}
		var i int
		if _, err := fmt.Sscanf(string(m.Body), "%d", &i); err != nil {
			return err
		}
		effects[i].Add(1)
		return nil
	})
	base := UniqueID(t)
	var queue []dedup.Message
	for i := range msgs {
		m := dedup.Message{ID: fmt.Sprintf("%s %d", base, i), Body: fmt.Appendf(nil, "%d", i)}
		queue = append(queue, m)
		if i%2 == 0 {
			queue = append(queue, m)
		}
	}
	rand.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
	ch := make(chan dedup.Message)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range workers {
		wg.Go(func() {
			for m := range ch {
				if err := deliver(ctx, h, m); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, m := range queue {
		ch <- m
	}
	close(ch)
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var bad []string
	for i := range effects {
		if n := effects[i].Load(); n != 1 {
			bad = append(bad, fmt.Sprintf("message %d took effect %d times", i, n))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d messages not exactly once: %v", len(bad), msgs, bad[:min(len(bad), 5)])
	}
	return nil
}
