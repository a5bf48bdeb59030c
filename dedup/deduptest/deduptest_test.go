package deduptest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// The suite passes on a correct store (idem's memstore through FromIdem).
func TestSuiteOnMemstore(t *testing.T) {
	t.Parallel()
	s := dedup.FromIdem(memstore.New())
	Run(t, func(*testing.T) dedup.Store { return s })
}

// naiveSetFirst is the usual hand-written consumer dedup: SET consumed:<id> NX
// before the handler, acknowledge when it was set already, nothing undone on
// failure.
func naiveSetFirst(*testing.T, dedup.Handler) func(dedup.Handler) dedup.Handler {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(next dedup.Handler) dedup.Handler {
		return func(ctx context.Context, m dedup.Message) error {
			mu.Lock()
			dup := seen[m.ID]
			seen[m.ID] = true
			mu.Unlock()
			if dup {
				return nil
			}
			return next(ctx, m)
		}
	}
}

// naiveMarkAfter checks for a done mark before the handler and sets it after
// a success: a failure is redelivered, but racing copies all run.
func naiveMarkAfter(*testing.T, dedup.Handler) func(dedup.Handler) dedup.Handler {
	var mu sync.Mutex
	done := map[string]bool{}
	return func(next dedup.Handler) dedup.Handler {
		return func(ctx context.Context, m dedup.Message) error {
			mu.Lock()
			d := done[m.ID]
			mu.Unlock()
			if d {
				return nil
			}
			if err := next(ctx, m); err != nil {
				return err
			}
			mu.Lock()
			done[m.ID] = true
			mu.Unlock()
			return nil
		}
	}
}

// The suite's checks catch each naive recipe's hole: they would fail on a
// store or wrapper that broke the guarantee.
func TestChecksCatchNaiveRecipes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		naive      func(*testing.T, dedup.Handler) func(dedup.Handler) dedup.Handler
		mustFail   []string
		mustReason string
	}{
		{"SetFirst", naiveSetFirst, []string{"FailureRedelivered", "ConcurrentCopiesOnce", "RandomFailuresExactlyOnce"}, ""},
		{"MarkAfter", naiveMarkAfter, []string{"ConcurrentCopiesOnce"}, "took effect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wrap := func(t *testing.T, next dedup.Handler) dedup.Handler { return tc.naive(t, next)(next) }
			for _, c := range handlerChecks {
				want := false
				for _, n := range tc.mustFail {
					want = want || n == c.name
				}
				if !want {
					continue
				}
				err := c.fn(t, wrap)
				if err == nil {
					t.Errorf("check %s passed the naive %s recipe; it must catch it", c.name, tc.name)
					continue
				}
				if tc.mustReason != "" && !strings.Contains(err.Error(), tc.mustReason) {
					t.Errorf("check %s failed %s for another reason: %v", c.name, tc.name, err)
				}
				t.Logf("%s on naive %s: %v", c.name, tc.name, err)
			}
		})
	}
}
