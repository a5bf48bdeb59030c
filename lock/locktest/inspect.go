package locktest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
)

// opsTTL is the lease of the operator tests: long enough to outlast a loaded
// machine's pauses, renewed every half second.
const opsTTL = 1500 * time.Millisecond

// RunOperator runs the operator's suite: lock.Inspect, lock.List and
// lock.Break on Lockers from h.New, which must implement lock.Inspector,
// lock.Lister and lock.Breaker. Set h.WaitersUnknown for a backend that
// cannot tell whether anyone waits.
func RunOperator(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("locktest: Harness.New is required")
	}
	s := &suite{h: h}
	suitekit.Cases{
		{"InspectHeldAndFree", s.testInspect},
		{"InspectWaiters", s.testInspectWaiters},
		{"ListPagesAndPrefix", s.testList},
		{"BreakHandsOverAndFencesTheBrokenHolder", s.testBreak},
	}.RunParallel(t)
}

func (s *suite) testInspect(t *testing.T) {
	l := s.locker(t)
	ctx := ctxT(t)
	k := key(t, "held")
	before := time.Now()
	lease := mustAcquire(t, l, k, lock.WithTTL(opsTTL), lock.WithHolder("payments-worker-1 pid 4242"))
	after := time.Now()
	defer lease.Release(ctx)

	info, err := lock.Inspect(ctx, l, k)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Key != k || info.Holder != "payments-worker-1 pid 4242" || info.Token != lease.Token() {
		t.Fatalf("Inspect = %+v, want held by the label with token %d", info, lease.Token())
	}
	if info.TimeLeft != lock.Unknown && (info.TimeLeft <= 0 || info.TimeLeft > 2*opsTTL+time.Second) {
		t.Errorf("TimeLeft = %v, want in (0, about %v]", info.TimeLeft, opsTTL)
	}
	// The server's clock may differ from ours a little.
	if !info.AcquiredAt.IsZero() && (info.AcquiredAt.Before(before.Add(-5*time.Second)) || info.AcquiredAt.After(after.Add(5*time.Second))) {
		t.Errorf("AcquiredAt = %v, want between %v and %v", info.AcquiredAt, before, after)
	}

	free, err := lock.Inspect(ctx, l, key(t, "free"))
	if err != nil || free.Held || free.Token != 0 || free.Holder != "" {
		t.Fatalf("Inspect(free) = %+v, %v; want not held", free, err)
	}
	for _, bad := range []string{"", strings.Repeat("k", lock.MaxKeyLen+1)} {
		if _, err := lock.Inspect(ctx, l, bad); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("Inspect(%d-byte key) = %v, want ErrInvalid", len(bad), err)
		}
	}
}

func (s *suite) testInspectWaiters(t *testing.T) {
	if s.h.WaitersUnknown {
		t.Skip("the backend cannot tell whether anyone waits")
	}
	l, other := s.locker(t), s.locker(t)
	ctx := ctxT(t)
	k := key(t, "queue")
	lease := mustAcquire(t, l, k, lock.WithTTL(opsTTL))
	got := make(chan *lock.Lease, 1)
	go func() {
		w, err := other.Acquire(ctx, k, lock.WithTTL(opsTTL))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	deadline := time.Now().Add(eventually)
	for {
		info, err := lock.Inspect(ctx, l, k)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters != lock.Unknown && info.Waiters > 1 {
			t.Fatalf("Waiters = %d with one Acquire waiting", info.Waiters)
		}
		if info.Waiting && (info.Waiters == 1 || info.Waiters == lock.Unknown) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect never showed the waiting Acquire: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if w := <-got; w != nil {
		_ = w.Release(ctx)
	}
}

func (s *suite) testList(t *testing.T) {
	l := s.locker(t)
	ctx := ctxT(t)
	base := key(t, "")
	want := map[string]uint64{}
	hold := func(k string) {
		lease := mustAcquire(t, l, k, lock.WithTTL(opsTTL), lock.WithHolder("lister"))
		t.Cleanup(func() { _ = lease.Release(ctx) })
		if strings.HasPrefix(k, base+"a") {
			want[k] = lease.Token()
		}
	}
	for _, k := range []string{"a1", "a2", "a3", "b1", "%_x", "*?[x]"} {
		hold(base + k)
	}
	released := mustAcquire(t, l, base+"a4")
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}

	seen := map[string]uint64{}
	eachPage(ctx, t, l, base+"a", 2, func(page lock.LockPage) {
		if len(page.Locks) > 2 {
			t.Fatalf("a page of limit 2 has %d locks", len(page.Locks))
		}
		for _, in := range page.Locks {
			// A lock may come twice (Redis's SCAN repeats keys when its
			// table is resized during a listing), but as the same lease.
			tok, dup := seen[in.Key]
			if dup && tok != in.Token || !in.Held || in.Holder != "lister" {
				t.Fatalf("List gave %+v (seen before with token %d: %v)", in, tok, dup)
			}
			seen[in.Key] = in.Token
		}
	})
	if len(seen) != len(want) {
		t.Fatalf("List(%q) = %v, want %v", base+"a", seen, want)
	}
	for k, tok := range want {
		if seen[k] != tok {
			t.Errorf("List: %q token %d, want %d", k, seen[k], tok)
		}
	}

	listWildcards(ctx, t, l, base)
	for _, bad := range []int{0, -1, lock.MaxListLimit + 1} {
		if _, err := lock.List(ctx, l, base, bad, ""); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("List(limit %d) = %v, want ErrInvalid", bad, err)
		}
	}
}

// listWildcards checks that the wildcards of LIKE and of glob patterns in
// a prefix are plain bytes: under base, only the key starting with them is
// listed. A page may come back short, with a cursor, when the server has
// many other keys to scan past (a shared Redis), so it follows the cursor.
func listWildcards(ctx context.Context, t *testing.T, l lock.Locker, base string) {
	for _, pfx := range []string{"%_", "*?["} {
		var keys []string
		eachPage(ctx, t, l, base+pfx, 10, func(page lock.LockPage) {
			for _, in := range page.Locks {
				keys = append(keys, strings.TrimPrefix(in.Key, base))
			}
		})
		if len(keys) != 1 || !strings.HasPrefix(keys[0], pfx) {
			t.Errorf("List(prefix %q) = %q; want only the key starting with it", pfx, keys)
		}
	}
}

// eachPage lists the locks under prefix, limit a page, following the
// cursor to the end, and calls f with each page.
func eachPage(ctx context.Context, t *testing.T, l lock.Locker, prefix string, limit int, f func(lock.LockPage)) {
	t.Helper()
	cursor := ""
	for range 10000 {
		page, err := lock.List(ctx, l, prefix, limit, cursor)
		if err != nil {
			t.Fatal(err)
		}
		f(page)
		if cursor = page.Cursor; cursor == "" {
			return
		}
	}
	t.Fatalf("List(prefix %q) never ended", prefix)
}

func (s *suite) testBreak(t *testing.T) {
	stuck, next, operator := s.locker(t), s.locker(t), s.locker(t)
	ctx := ctxT(t)
	k := key(t, "stuck")
	a := mustAcquire(t, stuck, k, lock.WithTTL(opsTTL), lock.WithHolder("payments-worker-1"))
	got := make(chan *lock.Lease, 1)
	go func() {
		b, err := next.Acquire(ctx, k, lock.WithTTL(opsTTL), lock.WithHolder("payments-worker-2"))
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()

	if _, err := lock.Break(ctx, operator, k, "", nil); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Break by nobody = %v, want ErrInvalid", err)
	}
	if _, err := lock.Break(ctx, operator, k, "ana\nroot", nil); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Break by a name with a newline = %v, want ErrInvalid", err)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	info, err := lock.Break(ctx, operator, k, "oncall-ana", log)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Holder != "payments-worker-1" || info.Token != a.Token() {
		t.Fatalf("Break returned %+v, want the broken holder with token %d", info, a.Token())
	}
	for _, want := range []string{"oncall-ana", "payments-worker-1", strconv.FormatUint(a.Token(), 10)} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("the break's log %q lacks %q", logged.String(), want)
		}
	}

	b := <-got
	if b == nil {
		t.Fatal("the waiter did not get the broken lock")
	}
	defer b.Release(ctx)
	if b.Token() <= a.Token() {
		t.Fatalf("successor's token %d not above the broken holder's %d", b.Token(), a.Token())
	}
	select {
	case <-a.Done():
	case <-time.After(eventually):
		t.Fatal("the broken holder's Done never closed")
	}
	if !errors.Is(a.Err(), lock.ErrLeaseLost) {
		t.Errorf("broken holder's Err = %v, want ErrLeaseLost", a.Err())
	}
	// A resource fenced by the successor's token refuses the broken holder.
	if err := fence.Check(b.Token(), a); !errors.Is(err, fence.ErrStale) {
		t.Errorf("fence.Check(successor's %d, broken %d) = %v, want ErrStale", b.Token(), a.Token(), err)
	}
	if err := a.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("broken holder's Release = %v, want ErrNotHeld", err)
	}

	free := key(t, "free")
	if _, err := lock.Break(ctx, operator, free, "oncall-ana", log); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("Break(free key) = %v, want ErrNotHeld", err)
	}
	if info, err := lock.Inspect(ctx, operator, k); err != nil || !info.Held || info.Token != b.Token() {
		t.Errorf("after the break, Inspect = %+v, %v; want the successor", info, err)
	}
}
