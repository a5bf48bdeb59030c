package idem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// downStore fails every call, as a store that cannot be reached.
type downStore struct{}

var errDown = errors.New("store down")

func (downStore) Claim(context.Context, string, string, time.Duration) (idem.Claim, error) {
	return idem.Claim{}, errDown
}
func (downStore) Record(context.Context, string, string, []byte, time.Duration) error { return errDown }
func (downStore) Release(context.Context, string, string) error                       { return errDown }

// TestObserver makes Do calls that end in every outcome and checks what the
// observer was told: the outcome, and the error Do returned.
func TestObserver(t *testing.T) {
	var mu sync.Mutex
	var events []idem.Event
	obs := idem.WithObserver(func(_ context.Context, e idem.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	})
	last := func() idem.Event {
		mu.Lock()
		defer mu.Unlock()
		if len(events) == 0 {
			t.Fatal("observer not called")
		}
		e := events[len(events)-1]
		events = nil
		return e
	}
	check := func(what string, want idem.Outcome, err error) {
		t.Helper()
		e := last()
		if e.Outcome != want || !errors.Is(e.Err, err) || (err == nil) != (e.Err == nil) || e.Duration <= 0 {
			t.Errorf("%s: told %v, %v, %v; want %v with the error Do returned (%v)", what, e.Outcome, e.Err, e.Duration, want, err)
		}
	}
	ctx := context.Background()
	s := memstore.New()
	ok := func(context.Context) (int, error) { return 42, nil }
	declined := errors.New("card declined")
	fail := func(context.Context) (int, error) { return 0, declined }

	_, err := idem.Do(ctx, s, "a", ok, obs)
	check("first call", idem.OutcomeExecuted, err)
	_, err = idem.Do(ctx, s, "a", ok, obs)
	check("copy", idem.OutcomeReplayed, err)
	_, err = idem.Do(ctx, s, "a", ok, obs, idem.WithFingerprint("other"))
	check("other fingerprint", idem.OutcomeMismatch, err)
	_, err = idem.Do(ctx, s, "b", fail, obs)
	check("failure", idem.OutcomeReleased, err)
	_, err = idem.Do(ctx, s, "c", fail, obs, idem.WithKeepError(func(error) bool { return true }))
	check("kept failure", idem.OutcomeKept, err)
	_, err = idem.Do(ctx, s, "", ok, obs)
	check("empty key", idem.OutcomeInvalid, err)
	_, err = idem.Do(ctx, downStore{}, "d", ok, obs)
	check("store down", idem.OutcomeStoreError, err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = idem.Do(cctx, s, "e", ok, obs)
	check("cancelled", idem.OutcomeCanceled, err)

	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = idem.Do(ctx, s, "f", func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
	}()
	<-started
	_, err = idem.Do(ctx, s, "f", ok, obs)
	check("copy while the first runs", idem.OutcomeConflict, err)
	close(release)
	<-done

	func() {
		defer func() { _ = recover() }()
		_, _ = idem.Do(ctx, s, "g", func(context.Context) (int, error) { panic("boom") }, obs)
	}()
	if e := last(); e.Outcome != idem.OutcomeReleased || e.Err == nil {
		t.Errorf("panic: told %v, %v; want released with an error", e.Outcome, e.Err)
	}
	if _, err := idem.Do(ctx, s, "g", ok); err != nil {
		t.Errorf("the key of a panicked call was not released: %v", err)
	}
}
