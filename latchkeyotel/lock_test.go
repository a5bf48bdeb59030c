package latchkeyotel_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/latchkeyotel"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// TestLockSpans follows one lease through acquire, a refused second
// acquire, and release: each Acquire call is a span under the caller's
// span, the held lease's span stays open until the release (with events
// for the acquisition and the release), and neither the key nor the token
// is an attribute anywhere.
func TestLockSpans(t *testing.T) {
	r := newRecorded(t)
	l := memlock.New()
	l.SetObserver(r.tel.LockObserver("mem", latchkeyotel.Server("memory", "")...))
	ctx, parent := r.tp.Tracer("test").Start(context.Background(), "charge")
	const key = "acct-7731"
	lease, err := l.Acquire(ctx, key, lock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, key, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second acquire: %v", err)
	}
	if n := len(r.ended("latchkey.lock")); n != 1 {
		t.Fatalf("%d lock spans ended while the lease is held, want only the refused one", n)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	spans := r.ended("latchkey.lock")
	if len(spans) != 2 {
		t.Fatalf("%d lock spans, want 2", len(spans))
	}
	refused, held := spans[0], spans[1]
	checkLockSpan(t, held, parent, "acquired")
	checkLockSpan(t, refused, parent, "not_acquired")
	if v, _ := attr(held, "latchkey.lock.end"); v.AsString() != "released" {
		t.Errorf("held span ended %q, want released", v.AsString())
	}
	if _, ok := attr(held, "latchkey.lock.hold.duration"); !ok {
		t.Error("held span has no hold duration")
	}
	if len(held.Events()) != 0 {
		t.Errorf("a healthy lease's span has events %v", held.Events())
	}
	if !held.EndTime().After(refused.EndTime()) {
		t.Error("the held lease's span ended before the release")
	}
	r.noSecrets(t, key, strconv.FormatUint(lease.Token(), 10))

	// The same outcomes as metrics.
	mem := []attribute.KeyValue{attribute.String("latchkey.lock.backend", "mem"), attribute.String("db.system.name", "memory")}
	if n := r.histCount(t, "latchkey.lock.acquire.duration", append(mem, attribute.String("latchkey.lock.outcome", "acquired"))...); n != 1 {
		t.Errorf("acquire histogram (acquired) count %d, want 1", n)
	}
	if n := r.histCount(t, "latchkey.lock.acquire.duration", append(mem, attribute.String("latchkey.lock.outcome", "not_acquired"))...); n != 1 {
		t.Errorf("acquire histogram (not_acquired) count %d, want 1", n)
	}
	if n := r.histCount(t, "latchkey.lock.hold.duration", append(mem, attribute.String("latchkey.lock.end", "released"))...); n != 1 {
		t.Errorf("hold histogram count %d, want 1", n)
	}
}

// checkLockSpan checks an Acquire call's span s, of outcome: a child of the
// caller's span parent, naming the backend and its system, with the wait's
// duration, and not an error, since not acquiring is an answer.
func checkLockSpan(t *testing.T, s sdktrace.ReadOnlySpan, parent trace.Span, outcome string) {
	t.Helper()
	if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("%s span is not a child of the caller's span", outcome)
	}
	if v, _ := attr(s, "latchkey.lock.outcome"); v.AsString() != outcome {
		t.Errorf("outcome %q, want %q", v.AsString(), outcome)
	}
	if v, _ := attr(s, "latchkey.lock.backend"); v.AsString() != "mem" {
		t.Errorf("%s span: backend %q", outcome, v.AsString())
	}
	if v, _ := attr(s, "db.system.name"); v.AsString() != "memory" {
		t.Errorf("%s span: db.system.name %q", outcome, v.AsString())
	}
	if _, ok := attr(s, "latchkey.lock.wait.duration"); !ok {
		t.Errorf("%s span has no wait duration", outcome)
	}
	if s.Status().Code == codes.Error {
		t.Errorf("%s span has status Error; not acquiring is an answer", outcome)
	}
}

// TestLockLossEvent lets a fixed lease expire: its held span ends with an
// event latchkey.lock.lease_lost carrying the reason, status Error, and the
// loss is counted.
func TestLockLossEvent(t *testing.T) {
	r := newRecorded(t)
	l := memlock.New()
	l.SetObserver(r.tel.LockObserver("mem"))
	lease, err := l.Acquire(context.Background(), "acct-1", lock.WithTTL(time.Second), lock.WithFixedTTL())
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	deadline := time.Now().Add(10 * time.Second)
	for len(r.ended("latchkey.lock")) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the loss is reported just after Done closes
	}
	held := r.ended("latchkey.lock")
	if len(held) != 1 {
		t.Fatalf("%d lock spans after the loss, want 1", len(held))
	}
	s := held[0]
	if s.Status().Code != codes.Error {
		t.Errorf("held span of a lost lease has status %v", s.Status())
	}
	var lost bool
	for _, e := range s.Events() {
		if e.Name == "latchkey.lock.lease_lost" {
			for _, kv := range e.Attributes {
				if kv.Key == "latchkey.lock.loss_reason" && kv.Value.AsString() == string(lock.LossExpired) {
					lost = true
				}
			}
		}
	}
	if !lost {
		t.Errorf("no lease_lost event with reason %q: %v", lock.LossExpired, s.Events())
	}
	if n := r.sum(t, "latchkey.lock.leases_lost", attribute.String("latchkey.lock.backend", "mem"),
		attribute.String("latchkey.lock.loss_reason", string(lock.LossExpired))); n != 1 {
		t.Errorf("leases_lost = %d, want 1", n)
	}
	if s.Parent().IsValid() {
		t.Error("a lease acquired without a span in context has a parent")
	}
}

// TestHashedKeys checks that WithHashedKeys adds a keyed hash of the key,
// the same for one key and different for another, never the key itself;
// and that a short secret is refused.
func TestHashedKeys(t *testing.T) {
	if _, err := latchkeyotel.New(latchkeyotel.WithHashedKeys([]byte("short"))); !errors.Is(err, latchkeyotel.ErrInvalid) {
		t.Fatalf("short secret: %v", err)
	}
	r := newRecorded(t, latchkeyotel.WithHashedKeys([]byte("0123456789abcdef-secret")))
	l := memlock.New()
	l.SetObserver(r.tel.LockObserver("mem"))
	ctx := context.Background()
	for _, k := range []string{"acct-1", "acct-1", "acct-2"} {
		lease, err := l.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		_ = lease.Release(ctx)
	}
	acq := r.ended("latchkey.lock")
	var hashes []string
	for _, s := range acq {
		v, ok := attr(s, "latchkey.lock.key_hash")
		if !ok {
			t.Fatal("no key hash on an acquire span")
		}
		hashes = append(hashes, v.AsString())
	}
	if hashes[0] != hashes[1] || hashes[0] == hashes[2] || len(hashes[0]) != 16 {
		t.Errorf("hashes %q: want one per key, 16 hex digits", hashes)
	}
	r.noSecrets(t, "acct-1", "acct-2")
	if n := r.histCount(t, "latchkey.lock.acquire.duration", attribute.String("latchkey.lock.backend", "mem"),
		attribute.String("latchkey.lock.outcome", "acquired")); n != 3 {
		t.Errorf("acquire count %d; the key hash must not split the metric", n)
	}
}

// TestLossBeforeAcquireReport feeds the observer a loss before the report
// of the acquisition of the same lease, the order a lease shorter than the
// time between its grant and the end of Acquire produces. A real backend
// makes that order only by chance of scheduling, so the events are made
// here by hand (the lease itself is a real one). The span must still end,
// as lost, and nothing be kept for the lease.
func TestLossBeforeAcquireReport(t *testing.T) {
	r := newRecorded(t)
	o := r.tel.LockObserver("mem")
	lease, err := memlock.New().Acquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	ctx := context.Background()
	o(lock.Event{Kind: lock.EventLoss, Lease: lease, Reason: lock.LossExpired, Held: time.Millisecond, Context: ctx})
	o(lock.Event{Kind: lock.EventAcquire, Lease: lease, Duration: time.Millisecond, Attempts: 1, Context: ctx})
	spans := r.ended("latchkey.lock")
	if len(spans) != 1 {
		t.Fatalf("%d lock spans ended, want 1", len(spans))
	}
	if v, _ := attr(spans[0], "latchkey.lock.end"); v.AsString() != "lost" || spans[0].Status().Code != codes.Error {
		t.Errorf("span ended %q with status %v, want lost and Error", v.AsString(), spans[0].Status())
	}
	// A second report of the same lease's end finds nothing kept.
	o(lock.Event{Kind: lock.EventRelease, Lease: lease, Context: ctx})
	o(lock.Event{Kind: lock.EventAcquire, Lease: lease, Duration: time.Millisecond, Attempts: 1, Context: ctx})
	if n := len(r.ended("latchkey.lock")); n != 2 {
		t.Errorf("%d lock spans after a second acquire report and its release, want 2", n)
	}
}
