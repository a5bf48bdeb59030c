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

type ctxMark struct{}

// TestObserverContextAndLease checks that the events of Acquire and Release
// carry their caller's context, and that every event of one lease carries
// that lease, so a tracer can parent its spans and pair a lease's start with
// its end.
func TestObserverContextAndLease(t *testing.T) {
	m, _ := NewManager(newFake())
	var (
		mu     sync.Mutex
		events []Event
	)
	m.SetObserver(Observer(func(e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}))
	actx := context.WithValue(context.Background(), ctxMark{}, "acquire")
	l, err := m.Acquire(actx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(actx, "k", WithWait(0)); err == nil {
		t.Fatal("second Acquire of a held key succeeded")
	}
	rctx := context.WithValue(context.Background(), ctxMark{}, "release")
	if err := l.Release(rctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 3 {
		t.Fatalf("%d events, want 3: %+v", len(events), events)
	}
	acq, refused, rel := events[0], events[1], events[2]
	if acq.Kind != EventAcquire || acq.Lease != l || acq.Context.Value(ctxMark{}) != "acquire" {
		t.Errorf("acquire event: kind %v, lease %p (want %p), context %v", acq.Kind, acq.Lease, l, acq.Context.Value(ctxMark{}))
	}
	if refused.Lease != nil || refused.Context.Value(ctxMark{}) != "acquire" {
		t.Errorf("refused acquire: lease %p, want nil; context %v", refused.Lease, refused.Context.Value(ctxMark{}))
	}
	if rel.Kind != EventRelease || rel.Lease != l || rel.Context.Value(ctxMark{}) != "release" {
		t.Errorf("release event: kind %v, lease %p (want %p), context %v", rel.Kind, rel.Lease, l, rel.Context.Value(ctxMark{}))
	}
	if rel.Held <= 0 {
		t.Errorf("release Held = %v, want the time from acquisition to Release", rel.Held)
	}
}

// TestObserverLossHeld checks that a lost lease reports how long it was
// held, and the lease it was.
func TestObserverLossHeld(t *testing.T) {
	m, _ := NewManager(newFake())
	lost := make(chan Event, 1)
	m.SetObserver(Observer(func(e Event) {
		if e.Kind == EventLoss {
			lost <- e
		}
	}))
	l, err := m.Acquire(context.Background(), "k", WithTTL(MinTTL), WithFixedTTL())
	if err != nil {
		t.Fatal(err)
	}
	e := <-lost
	if e.Lease != l || e.Held <= 0 || e.Context == nil {
		t.Errorf("loss event: lease %p (want %p), held %v, context %v", e.Lease, l, e.Held, e.Context)
	}
}
