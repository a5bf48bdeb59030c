package dedup_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// Every idem.Store keeps the dedup contract through FromIdem.
func TestFromIdemConformance(t *testing.T) {
	t.Parallel()
	s := dedup.FromIdem(memstore.New())
	deduptest.Run(t, func(*testing.T) dedup.Store { return s })
}

// faultStore embeds a real store and fails chosen calls.
type faultStore struct {
	dedup.Store
	claims      atomic.Int32
	claimAt     atomic.Int64 // UnixNano when the last Claim reached the store
	doneFails   atomic.Int32 // fail this many Done calls
	releaseFail atomic.Bool
}

func (f *faultStore) Claim(ctx context.Context, id string, ttl time.Duration) (dedup.Claim, error) {
	f.claims.Add(1)
	f.claimAt.Store(time.Now().UnixNano())
	return f.Store.Claim(ctx, id, ttl)
}

func (f *faultStore) Done(ctx context.Context, id, token string, retention time.Duration) error {
	if f.doneFails.Add(-1) >= 0 {
		return errors.New("store down")
	}
	return f.Store.Done(ctx, id, token, retention)
}

func (f *faultStore) Release(ctx context.Context, id, token string) error {
	if f.releaseFail.Load() {
		return errors.New("store down")
	}
	return f.Store.Release(ctx, id, token)
}

func newFault(t *testing.T, opts ...dedup.Option) (*faultStore, *dedup.Deduper) {
	t.Helper()
	f := &faultStore{Store: dedup.FromIdem(memstore.New())}
	d, err := dedup.New(f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f, d
}

func ok(context.Context, dedup.Message) error { return nil }

func TestNewRejectsBadArguments(t *testing.T) {
	t.Parallel()
	s := dedup.FromIdem(memstore.New())
	for name, fn := range map[string]func() (*dedup.Deduper, error){
		"nil store":    func() (*dedup.Deduper, error) { return dedup.New(nil) },
		"zero TTL":     func() (*dedup.Deduper, error) { return dedup.New(s, dedup.WithProcessingTTL(0)) },
		"negative ret": func() (*dedup.Deduper, error) { return dedup.New(s, dedup.WithRetention(-time.Second)) },
		"huge TTL":     func() (*dedup.Deduper, error) { return dedup.New(s, dedup.WithProcessingTTL(dedup.MaxDuration+1)) },
	} {
		if d, err := fn(); d != nil || !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("%s: New = %v, %v; want nil, ErrInvalid", name, d, err)
		}
	}
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, d := newFault(t)
	m := dedup.Message{ID: "m-1"}
	boom := errors.New("boom")
	if o, err := d.Process(ctx, m, func(context.Context, dedup.Message) error { return boom }); o != dedup.OutcomeFailed || !errors.Is(err, boom) {
		t.Errorf("failing handler: %v, %v; want failed, boom", o, err)
	}
	if o, err := d.Process(ctx, m, ok); o != dedup.OutcomeProcessed || err != nil {
		t.Errorf("redelivery: %v, %v; want processed, nil", o, err)
	}
	if o, err := d.Process(ctx, m, ok); o != dedup.OutcomeDuplicate || err != nil {
		t.Errorf("duplicate: %v, %v; want duplicate, nil", o, err)
	}
	before := f.claims.Load()
	for _, id := range []string{"", "a\nb", string([]byte{0xff}), string(make([]byte, dedup.MaxIDLen+1))} {
		if o, err := d.Process(ctx, dedup.Message{ID: id}, ok); o != dedup.OutcomeRejected || !errors.Is(err, dedup.ErrInvalidID) {
			t.Errorf("id %q: %v, %v; want rejected, ErrInvalidID", id, o, err)
		}
	}
	if o, err := d.Process(ctx, m, nil); o != dedup.OutcomeRejected || !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("nil handler: %v, %v; want rejected, ErrInvalid", o, err)
	}
	if n := f.claims.Load(); n != before {
		t.Errorf("invalid input reached the store (%d claims)", n-before)
	}
}

// A copy arriving while another processes is neither acked nor run, and
// carries the time left on the claim.
func TestBusyCopyNotAckedNotRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, d := newFault(t, dedup.WithProcessingTTL(time.Minute))
	m := dedup.Message{ID: "m-busy"}
	inside, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = d.Process(ctx, m, func(context.Context, dedup.Message) error { close(inside); <-release; return nil })
	}()
	<-inside
	ran := false
	o, err := d.Process(ctx, m, func(context.Context, dedup.Message) error { ran = true; return nil })
	close(release)
	if o != dedup.OutcomeBusy || !errors.Is(err, dedup.ErrInProgress) || dedup.ShouldAck(err) || ran {
		t.Fatalf("copy during processing: %v, %v, ran=%v; want busy, ErrInProgress, no ack, not run", o, err, ran)
	}
	if ra := dedup.RetryAfter(err); ra <= 0 || ra > time.Minute {
		t.Errorf("RetryAfter = %v, want within (0, 1m]", ra)
	}
}

// The handler's context ends at the processing TTL, before the claim can pass
// to another consumer.
func TestHandlerCancelledAtTTL(t *testing.T) {
	t.Parallel()
	const ttl = 200 * time.Millisecond
	f, d := newFault(t, dedup.WithProcessingTTL(ttl))
	var deadline time.Time
	o, err := d.Process(context.Background(), dedup.Message{ID: "slow"}, func(ctx context.Context, _ dedup.Message) error {
		deadline, _ = ctx.Deadline()
		<-ctx.Done()
		return ctx.Err()
	})
	if o != dedup.OutcomeFailed || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow handler: %v, %v; want failed, deadline exceeded", o, err)
	}
	claimed := time.Unix(0, f.claimAt.Load())
	if deadline.IsZero() || deadline.After(claimed.Add(ttl)) {
		t.Fatalf("handler deadline %v after the claim's expiry %v", deadline, claimed.Add(ttl))
	}
}

// A panicking handler releases its claim, so the redelivery is processed at
// once rather than after the TTL.
func TestPanicReleasesClaim(t *testing.T) {
	t.Parallel()
	_, d := newFault(t)
	m := dedup.Message{ID: "panics"}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic swallowed")
			}
		}()
		_, _ = d.Process(context.Background(), m, func(context.Context, dedup.Message) error { panic("bug") })
	}()
	if o, err := d.Process(context.Background(), m, ok); o != dedup.OutcomeProcessed || err != nil {
		t.Fatalf("after a panic: %v, %v; want processed", o, err)
	}
}

// A Done that keeps failing is reported as ErrNotRecorded, which adapters
// acknowledge (the effect happened); a transient failure is retried.
func TestDoneFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, d := newFault(t)
	f.doneFails.Store(1)
	if o, err := d.Process(ctx, dedup.Message{ID: "transient"}, ok); o != dedup.OutcomeProcessed || err != nil {
		t.Fatalf("one failed Done: %v, %v; want processed, nil (retried)", o, err)
	}
	if o, _ := d.Process(ctx, dedup.Message{ID: "transient"}, ok); o != dedup.OutcomeDuplicate {
		t.Fatalf("after retried Done: %v, want duplicate", o)
	}
	f.doneFails.Store(100)
	o, err := d.Process(ctx, dedup.Message{ID: "down"}, ok)
	if o != dedup.OutcomeProcessed || !errors.Is(err, dedup.ErrNotRecorded) || !dedup.ShouldAck(err) {
		t.Fatalf("Done down: %v, %v; want processed, ErrNotRecorded, ack", o, err)
	}
}

// A failed Release is reported with the handler's error and is not acked.
func TestReleaseFailure(t *testing.T) {
	t.Parallel()
	f, d := newFault(t)
	f.releaseFail.Store(true)
	boom := errors.New("boom")
	o, err := d.Process(context.Background(), dedup.Message{ID: "r"}, func(context.Context, dedup.Message) error { return boom })
	if o != dedup.OutcomeFailed || !errors.Is(err, boom) || dedup.ShouldAck(err) {
		t.Fatalf("release down: %v, %v; want failed, boom, no ack", o, err)
	}
}

// A consumer shutting down (its context cancelled while the handler ran)
// still marks the message done.
func TestDoneSurvivesCancelledCaller(t *testing.T) {
	t.Parallel()
	_, d := newFault(t)
	ctx, cancel := context.WithCancel(context.Background())
	m := dedup.Message{ID: "shutdown"}
	o, err := d.Process(ctx, m, func(context.Context, dedup.Message) error { cancel(); return nil })
	if o != dedup.OutcomeProcessed || err != nil {
		t.Fatalf("%v, %v; want processed, nil", o, err)
	}
	if o, _ := d.Process(context.Background(), m, ok); o != dedup.OutcomeDuplicate {
		t.Fatalf("redelivery after shutdown: %v, want duplicate", o)
	}
}

// FromIdem reports a lost claim as both sentinels.
func TestFromIdemClaimLost(t *testing.T) {
	t.Parallel()
	s := dedup.FromIdem(memstore.New())
	err := s.Done(context.Background(), "nobody", "token", time.Minute)
	if !errors.Is(err, dedup.ErrClaimLost) || !errors.Is(err, idem.ErrClaimLost) {
		t.Fatalf("Done without a claim = %v, want ErrClaimLost (both packages)", err)
	}
}
