package metrics

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// flakyDone fails Done on demand, as a store that goes away between the
// handler and the bookkeeping would.
type flakyDone struct {
	dedup.Store
	mu   sync.Mutex
	fail bool
}

func (s *flakyDone) Done(ctx context.Context, id, token string, retention time.Duration) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return errors.New("connection reset")
	}
	return s.Store.Done(ctx, id, token, retention)
}

// TestDedupMetrics runs deliveries through every outcome (processed,
// duplicate dropped, busy, handler error with the claim released, processed
// but not marked done, rejected) and checks the counters, the Bloom fill
// gauge and the lint.
func TestDedupMetrics(t *testing.T) {
	m, reg := registered(t, NewDedup)
	store := &flakyDone{Store: dedup.FromIdem(memstore.New())}
	d, err := dedup.New(store, dedup.WithObserver(m.Observer("orders")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	ok := func(context.Context, dedup.Message) error { return nil }
	process := func(id string, h dedup.Handler, want dedup.Outcome) {
		t.Helper()
		if got, err := d.Process(ctx, dedup.Message{ID: id}, h); got != want {
			t.Fatalf("Process(%s) = %v, %v; want %v", id, got, err, want)
		}
	}

	process("m1", ok, dedup.OutcomeProcessed)
	process("m1", ok, dedup.OutcomeDuplicate)
	process("m1", ok, dedup.OutcomeDuplicate)
	process("m2", func(context.Context, dedup.Message) error { return errors.New("ledger down") }, dedup.OutcomeFailed)
	process("m2", ok, dedup.OutcomeProcessed) // the released claim lets the redelivery through
	process("", ok, dedup.OutcomeRejected)

	// A copy arriving while the first is in its handler is busy.
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = d.Process(ctx, dedup.Message{ID: "m3"}, func(context.Context, dedup.Message) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	process("m3", ok, dedup.OutcomeBusy)
	close(release)
	<-done

	store.mu.Lock()
	store.fail = true
	store.mu.Unlock()
	process("m4", ok, dedup.OutcomeProcessed) // ran, but not marked done

	for outcome, want := range map[string]float64{"processed": 4, "duplicate": 2, "busy": 1, "failed": 1, "rejected": 1} {
		if got := testutil.ToFloat64(m.messages.WithLabelValues("orders", outcome)); got != want {
			t.Errorf("messages_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := testutil.ToFloat64(m.released.WithLabelValues("orders")); got != 1 {
		t.Errorf("claims_released_total = %v, want 1", got)
	}
	for op, want := range map[string]float64{"done": 1, "release": 0} {
		if got := testutil.ToFloat64(m.storeErrs.WithLabelValues("orders", op)); got != want {
			t.Errorf("store_errors_total{operation=%q} = %v, want %v", op, got, want)
		}
	}

	fill := 0.25
	m.BloomFill("orders-bloom", func() float64 { return fill })
	if n := testutil.CollectAndCount(m, "latchkey_dedup_bloom_fill_ratio"); n != 1 {
		t.Fatalf("%d bloom_fill_ratio series, want 1", n)
	}
	fill = 0.5 // read at scrape time
	if err := testutil.GatherAndCompare(reg, stringsReader(`
# HELP latchkey_dedup_bloom_fill_ratio Fraction of a Bloom prefilter's bits that are set; its false-positive rate grows with it.
# TYPE latchkey_dedup_bloom_fill_ratio gauge
latchkey_dedup_bloom_fill_ratio{filter="orders-bloom"} 0.5
`), "latchkey_dedup_bloom_fill_ratio"); err != nil {
		t.Error(err)
	}
	m.BloomFill("orders-bloom", nil)
	if n := testutil.CollectAndCount(m, "latchkey_dedup_bloom_fill_ratio"); n != 0 {
		t.Errorf("%d bloom_fill_ratio series after removal, want 0", n)
	}
	m.BloomFill("orders-bloom", func() float64 { return 0.1 })
	lint(t, m)
}
