package sqllock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/sqllock"
)

// TestServerCrashLosesNoHolder crashes PostgreSQL right after acquisitions
// and releases. Releases commit without waiting for the log flush, so a
// crash may lose them: the lock then stays held until its lease ends, and
// is taken after that with a higher token. Acquisitions wait for the flush:
// after the crash every lock acquired before it is still held, and another
// Locker's try is refused. (An acquisition that did not wait would be lost
// with the server's memory, and the try would take a lock its holder still
// believes it holds.)
func TestServerCrashLosesNoHolder(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	ctx := t.Context()
	a, err := sqllock.NewPgx(ctx, testsvc.OpenPgx(t, pg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const n = 10
	held := make([]*lock.Lease, n)
	released := make([]uint64, n)
	for i := range n {
		if held[i], err = a.Acquire(ctx, keyOf("held", i), lock.WithTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
		l, err := a.Acquire(ctx, keyOf("released", i), lock.WithTTL(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		released[i] = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pg.Crash()
	pg.Start()

	b, err := sqllock.NewPgx(ctx, testsvc.OpenPgx(t, pg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range n {
		if _, err := b.Acquire(ctx, keyOf("held", i), lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("a try of a lock acquired before the crash: %v, want ErrNotAcquired", err)
		}
		l, err := b.Acquire(ctx, keyOf("released", i), lock.WithWait(30*time.Second))
		if err != nil {
			t.Fatalf("a lock released before the crash (its release lost at worst): %v", err)
		}
		if l.Token() <= released[i] {
			t.Fatalf("token %d after the crash, not above %d issued before it", l.Token(), released[i])
		}
		_ = l.Release(context.Background())
	}
}

func keyOf(kind string, i int) string { return kind + ":" + string(rune('a'+i)) }
