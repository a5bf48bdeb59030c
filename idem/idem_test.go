package idem_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/internal/flakystore"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

func TestKeyDoesNotAlias(t *testing.T) {
	t.Parallel()
	tuples := [][]string{
		{"a:b", "c"}, {"a", "b:c"}, {"a", "b", "c"}, {"ab", "c"}, {"a", "bc"}, {"abc"},
		{"1:a", ""}, {"", "1:a"}, {"a b"}, {"a", "b"}, {"", ""}, {""}, {},
	}
	seen := map[string]int{}
	for i, tu := range tuples {
		k := idem.Key(tu...)
		if j, ok := seen[k]; ok {
			t.Fatalf("Key(%q) = Key(%q) = %q", tu, tuples[j], k)
		}
		seen[k] = i
	}
}

func FuzzKeyInjective(f *testing.F) {
	f.Add("a:b", "c", "a", "b:c")
	f.Add("1:x", "", "", "1:x")
	f.Add("a 1:b", "", "a", "b")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		if (a != c || b != d) && idem.Key(a, b) == idem.Key(c, d) {
			t.Fatalf("Key(%q, %q) == Key(%q, %q)", a, b, c, d)
		}
		if idem.Key(a, b) == idem.Key(a+b) && b != "" {
			t.Fatalf("two parts alias one part: %q %q", a, b)
		}
	})
}

func TestCheckKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"", strings.Repeat("k", idem.MaxKeyLen+1), "a\x00b", "a\nb", "\xff"} {
		if err := idem.CheckKey(k); !errors.Is(err, idem.ErrInvalidKey) {
			t.Errorf("CheckKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	for _, k := range []string{"k", strings.Repeat("k", idem.MaxKeyLen), "pay 1:x {tag}", "ключ"} {
		if err := idem.CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q) = %v", k, err)
		}
	}
}

func TestBeginRejectsBadArguments(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	cases := []struct {
		name string
		s    idem.Store
		key  string
		opts []idem.Option
		want error
	}{
		{"nil store", nil, "k", nil, idem.ErrInvalid},
		{"empty key", s, "", nil, idem.ErrInvalidKey},
		{"zero in-progress", s, "k", []idem.Option{idem.WithInProgress(0)}, idem.ErrInvalid},
		{"huge retention", s, "k", []idem.Option{idem.WithRetention(math.MaxInt64)}, idem.ErrInvalid},
		{"negative wait", s, "k", []idem.Option{idem.WithWait(-1)}, idem.ErrInvalid},
	}
	for _, c := range cases {
		if _, _, err := idem.Begin(ctx, c.s, c.key, "", c.opts...); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if s.Len() != 0 {
		t.Fatal("a rejected call reached the store")
	}
}

// begin claims the key "k" on s, which must be free, and returns its run.
func begin(t *testing.T, s idem.Store, opts ...idem.Option) *idem.Run {
	t.Helper()
	run, _, err := idem.Begin(context.Background(), s, "k", "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func TestInProgressErrorCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	begin(t, s, idem.WithInProgress(time.Minute))
	_, _, err := idem.Begin(ctx, s, "k", "")
	var ip *idem.InProgressError
	if !errors.As(err, &ip) || !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("err = %v, want *InProgressError", err)
	}
	if ip.RetryAfter <= 0 || ip.RetryAfter > time.Minute {
		t.Fatalf("RetryAfter = %v", ip.RetryAfter)
	}
}

func TestRunFinishesOnce(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	run := begin(t, s)
	if err := run.Record(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := run.Release(ctx); err == nil {
		t.Fatal("Release after Record succeeded")
	}
	_, replay, err := idem.Begin(ctx, s, "k", "")
	if err != nil || replay == nil || string(replay.Result) != "x" {
		t.Fatalf("replay = %v, %v", replay, err)
	}
}

func TestRunContextEndsAtDeadline(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	before := time.Now()
	run := begin(t, s, idem.WithInProgress(time.Hour))
	rctx, cancel := run.Context(ctx)
	defer cancel()
	dl, ok := rctx.Deadline()
	if !ok || dl.Before(before.Add(time.Hour)) || dl.After(time.Now().Add(time.Hour)) || !dl.Equal(run.Deadline()) {
		t.Fatalf("run context deadline %v, want about an hour from the claim", dl)
	}
}

func TestDoPanicReleasesClaim(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic swallowed")
			}
		}()
		_, _ = idem.Do(ctx, s, "k", func(context.Context) (int, error) { panic("boom") })
	}()
	v, err := idem.Do(ctx, s, "k", func(context.Context) (int, error) { return 7, nil })
	if err != nil || v != 7 {
		t.Fatalf("retry after panic = %d, %v; want it to run", v, err)
	}
}

func TestDoKeepError(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	declined := errors.New("card declined")
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return 0, declined }
	keep := idem.WithKeepError(func(err error) bool { return errors.Is(err, declined) })
	if _, err := idem.Do(ctx, s, "k", fn, keep); !errors.Is(err, declined) {
		t.Fatalf("first = %v", err)
	}
	_, err := idem.Do(ctx, s, "k", fn, keep)
	if !errors.Is(err, idem.ErrReplayedFailure) || err.Error() != "card declined" || runs != 1 {
		t.Fatalf("second = %v after %d runs; want the kept failure replayed", err, runs)
	}
}

func TestDoUnencodableResultIsNotRunAgain(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	var runs atomic.Int32
	fn := func(context.Context) (func(), error) { runs.Add(1); return func() {}, nil }
	if _, err := idem.Do(ctx, s, "k", fn); !errors.Is(err, idem.ErrNotRecorded) {
		t.Fatalf("first = %v, want ErrNotRecorded", err)
	}
	if _, err := idem.Do(ctx, s, "k", fn); !errors.Is(err, idem.ErrReplayedFailure) || runs.Load() != 1 {
		t.Fatalf("second = %v after %d runs; want a replayed failure, no second run", err, runs.Load())
	}
}

func TestDoRecordsDespiteCanceledCaller(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	ctx, cancel := context.WithCancel(context.Background())
	v, err := idem.Do(ctx, s, "k", func(context.Context) (string, error) {
		cancel() // the client hung up while the payment went through
		return "paid", nil
	})
	if err != nil || v != "paid" {
		t.Fatalf("Do = %q, %v", v, err)
	}
	v, err = idem.Do(context.Background(), s, "k", func(context.Context) (string, error) {
		return "paid twice", nil
	})
	if err != nil || v != "paid" {
		t.Fatalf("retry = %q, %v; want the recorded %q", v, err, "paid")
	}
}

func TestWaitRunsWhenHolderReleases(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	run := begin(t, s)
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = run.Release(ctx)
	}()
	v, err := idem.Do(ctx, s, "k", func(context.Context) (string, error) { return "mine", nil }, idem.WithWait(5*time.Second))
	if err != nil || v != "mine" {
		t.Fatalf("waiter = %q, %v; want it to run after the release", v, err)
	}
}

func TestWaitGivesUp(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), memstore.New()
	begin(t, s)
	start := time.Now()
	_, _, err := idem.Begin(ctx, s, "k", "", idem.WithWait(50*time.Millisecond))
	if !errors.Is(err, idem.ErrInProgress) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, _, err := idem.Begin(cctx, s, "k", "", idem.WithWait(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}

func TestTokensRejectBadArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := idem.IssueToken(ctx, nil, "", time.Minute); !errors.Is(err, idem.ErrInvalid) {
		t.Error(err)
	}
	if _, err := idem.IssueToken(ctx, memstore.New(), "", 0); !errors.Is(err, idem.ErrInvalid) {
		t.Error(err)
	}
}

// newFlaky is a memstore whose calls fail with err on cue.
func newFlaky(err error) *flakystore.Store { return flakystore.New(memstore.New(), err) }

// A payment goes through and the store drops the connection on the first
// Record: the record is sent again and lands, so the client's retry gets the
// payment's answer, not an "in progress" until the deadline passes.
func TestRecordSurvivesOneStoreHiccup(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), newFlaky(errors.New("connection reset"))
	s.RecordFails.Store(1)
	var charges atomic.Int32
	pay := func(context.Context) (string, error) { charges.Add(1); return "paid", nil }
	if v, err := idem.Do(ctx, s, "pay-1", pay); err != nil || v != "paid" {
		t.Fatalf("Do = %q, %v; want the record to land on the second try", v, err)
	}
	if v, err := idem.Do(ctx, s, "pay-1", pay); err != nil || v != "paid" || charges.Load() != 1 {
		t.Fatalf("retry = %q, %v after %d charges; want the recorded answer, one charge", v, err, charges.Load())
	}
	if n := s.Records.Load(); n != 2 {
		t.Errorf("%d Record calls, want 2", n)
	}
}

// A failed charge whose claim cannot be released at first is released on
// the second try, so the client's retry charges again instead of waiting.
func TestReleaseSurvivesOneStoreHiccup(t *testing.T) {
	t.Parallel()
	ctx, s := context.Background(), newFlaky(errors.New("connection reset"))
	s.ReleaseFails.Store(1)
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
	down.RecordFails.Store(100)
	if _, err := idem.Do(ctx, down, "k", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, idem.ErrNotRecorded) {
		t.Fatalf("Do on a store that stays down = %v, want ErrNotRecorded", err)
	}
	if n := down.Records.Load(); n != 3 {
		t.Errorf("%d Record calls on a store that stays down, want 3", n)
	}
	lost := newFlaky(idem.ErrClaimLost)
	lost.RecordFails.Store(100)
	if _, err := idem.Do(ctx, lost, "k", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, idem.ErrClaimLost) {
		t.Fatalf("Do with a lost claim = %v, want ErrClaimLost", err)
	}
	if n := lost.Records.Load(); n != 1 {
		t.Errorf("%d Record calls with a lost claim, want 1", n)
	}
}
