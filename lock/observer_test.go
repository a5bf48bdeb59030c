package lock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestObserverOneEndPerLease races Release against expiry on many leases:
// each held lease must end in exactly one EventRelease or EventLoss, or a
// held-leases gauge built from the events would drift.
func TestObserverOneEndPerLease(t *testing.T) {
	m, _ := NewManager(newFake())
	var acquired, released, lost, renewed atomic.Int64
	m.SetObserver(Observer(func(e Event) {
		switch e.Kind {
		case EventAcquire:
			if e.Err == nil {
				acquired.Add(1)
			}
		case EventRelease:
			released.Add(1)
		case EventLoss:
			if e.Reason != LossExpired {
				t.Errorf("loss reason %q, want %q", e.Reason, LossExpired)
			}
			lost.Add(1)
		case EventRenew:
			renewed.Add(1)
		}
	}))
	ctx := context.Background()
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Acquire(ctx, fmt.Sprintf("k%d", i), WithTTL(MinTTL), WithFixedTTL())
			if err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Duration(i%20) * time.Millisecond) // around the 10 ms expiry
			_ = l.Release(ctx)
			<-l.Done()
		}()
	}
	wg.Wait()
	// A loss is reported after Done closes; give the last ones a moment.
	deadline := time.Now().Add(5 * time.Second)
	for released.Load()+lost.Load() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if acquired.Load() != n || released.Load()+lost.Load() != n {
		t.Fatalf("acquired %d, released %d, lost %d: want %d acquired and one end each", acquired.Load(), released.Load(), lost.Load(), n)
	}
	if renewed.Load() != 0 {
		t.Errorf("%d renewals of fixed leases", renewed.Load())
	}
	time.Sleep(20 * time.Millisecond)
	if got := released.Load() + lost.Load(); got != n {
		t.Errorf("%d ends reported for %d leases", got, n)
	}
	t.Logf("released %d, lost %d", released.Load(), lost.Load())
}

// TestObserverOff checks that SetObserver(nil) turns reporting off.
func TestObserverOff(t *testing.T) {
	m, _ := NewManager(newFake())
	var events atomic.Int64
	m.SetObserver(Observer(func(Event) { events.Add(1) }))
	m.SetObserver(nil)
	l, err := m.Acquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if events.Load() != 0 {
		t.Errorf("%d events after SetObserver(nil)", events.Load())
	}
}
