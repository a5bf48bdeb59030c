package bloomfilter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
)

// The filter answers "maybe seen" with how far to trust it, "not seen" for
// certain, and refuses to forget.
func TestInspect(t *testing.T) {
	t.Parallel()
	c, prefix := shared(t)
	f := newFilter(t, c, prefix, 1000, 0.01)
	ctx := t.Context()
	if _, err := f.Lookup(ctx, "msg-1"); !errors.Is(err, dedup.ErrNotFound) {
		t.Fatalf("Lookup before any add = %v, want ErrNotFound", err)
	}
	if _, err := f.TestAndAddBatch(ctx, ids("msg", 0, 100)); err != nil {
		t.Fatal(err)
	}
	m, err := f.Lookup(ctx, "msg-1")
	if err != nil || m.State != dedup.Done || !m.Approximate {
		t.Fatalf("Lookup of an added id = %+v, %v; want an approximate Done", m, err)
	}
	if m.FillRatio <= 0 || m.FillRatio >= 1 || m.FalsePositiveRate <= 0 || m.FalsePositiveRate >= 0.01 {
		t.Errorf("fill %v, false-positive rate %v: want a partly filled filter below its 1%% target", m.FillRatio, m.FalsePositiveRate)
	}
	err = f.Forget(ctx, "msg-1", true)
	if !errors.Is(err, dedup.ErrCannotForget) || !strings.Contains(err.Error(), "48h") {
		t.Fatalf("Forget = %v, want ErrCannotForget saying when the id ages out", err)
	}
	if seen, err := f.Test(ctx, "msg-1"); err != nil || !seen {
		t.Fatalf("after the refused Forget: seen %v, %v", seen, err)
	}
	deduptest.CheckBadIDsRefused(t, f)
}
