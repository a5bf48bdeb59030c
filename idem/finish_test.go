package idem_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// flakyStore is a real store whose Record and Release fail on cue: no real
// store can be made to lose one write at the moment a test chooses.
type flakyStore struct {
	idem.Store
	recordFails, releaseFails atomic.Int32 // fail this many calls
	records, releases         atomic.Int32 // calls made
	err                       error        // what a failing call returns
}

func newFlaky(err error) *flakyStore { return &flakyStore{Store: memstore.New(), err: err} }

func (f *flakyStore) Record(ctx context.Context, key, token string, result []byte, retention time.Duration) error {
	f.records.Add(1)
	if f.recordFails.Add(-1) >= 0 {
		return f.err
	}
	return f.Store.Record(ctx, key, token, result, retention)
}

func (f *flakyStore) Release(ctx context.Context, key, token string) error {
	f.releases.Add(1)
	if f.releaseFails.Add(-1) >= 0 {
		return f.err
	}
	return f.Store.Release(ctx, key, token)
}

// A payment goes through and the store drops the connection on the first
// Record: the record is sent again and lands, so the client's retry gets the
// payment's answer, not an "in progress" until the deadline passes.
func TestRecordSurvivesOneStoreHiccup(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), newFlaky(errors.New("connection reset"))
	s.recordFails.Store(1)
	var charges atomic.Int32
	pay := func(context.Context) (string, error) { charges.Add(1); return "paid", nil }
	if v, err := idem.Do(ctx, s, "pay-1", pay); err != nil || v != "paid" {
		t.Fatalf("Do = %q, %v; want the record to land on the second try", v, err)
	}
	if v, err := idem.Do(ctx, s, "pay-1", pay); err != nil || v != "paid" || charges.Load() != 1 {
		t.Fatalf("retry = %q, %v after %d charges; want the recorded answer, one charge", v, err, charges.Load())
	}
	if n := s.records.Load(); n != 2 {
		t.Errorf("%d Record calls, want 2", n)
	}
}

// A failed charge whose claim cannot be released at first is released on
// the second try, so the client's retry charges again instead of waiting.
func TestReleaseSurvivesOneStoreHiccup(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), newFlaky(errors.New("connection reset"))
	s.releaseFails.Store(1)
	declined := errors.New("card declined")
	if _, err := idem.Do(ctx, s, "pay-2", func(context.Context) (string, error) { return "", declined }); !errors.Is(err, declined) || strings.Contains(err.Error(), "releasing") {
		t.Fatalf("Do = %v; want the decline alone, the release retried", err)
	}
	if v, err := idem.Do(ctx, s, "pay-2", func(context.Context) (string, error) { return "paid", nil }); err != nil || v != "paid" {
		t.Fatalf("retry = %q, %v; want it to run", v, err)
	}
}

// A store that stays down is asked three times, then the run reports
// ErrNotRecorded; a lost claim is final and asked once.
func TestFinishGivesUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	down := newFlaky(errors.New("connection refused"))
	down.recordFails.Store(100)
	if _, err := idem.Do(ctx, down, "k", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, idem.ErrNotRecorded) {
		t.Fatalf("Do on a store that stays down = %v, want ErrNotRecorded", err)
	}
	if n := down.records.Load(); n != 3 {
		t.Errorf("%d Record calls on a store that stays down, want 3", n)
	}
	lost := newFlaky(idem.ErrClaimLost)
	lost.recordFails.Store(100)
	if _, err := idem.Do(ctx, lost, "k", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, idem.ErrClaimLost) {
		t.Fatalf("Do with a lost claim = %v, want ErrClaimLost", err)
	}
	if n := lost.records.Load(); n != 1 {
		t.Errorf("%d Record calls with a lost claim, want 1", n)
	}
}
