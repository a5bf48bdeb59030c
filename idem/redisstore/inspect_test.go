package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemtest"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
)

// Records kept as a hash by earlier versions can be looked up and forgotten
// too: an operator's repair must not depend on when the record was written.
func TestInspectHashRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, c, _ := teststores.Redis(t)
	done, running := idemtest.UniqueKey(t), idemtest.UniqueKey(t)
	c.HSet(ctx, s.RecordKey(done), "s", "d", "f", "fp", "r", "ch_1")
	c.PExpire(ctx, s.RecordKey(done), time.Minute)
	c.HSet(ctx, s.RecordKey(running), "s", "p", "f", "fp2", "t", "tok")
	c.PExpire(ctx, s.RecordKey(running), time.Minute)

	r, err := s.Lookup(ctx, done)
	if err != nil || r.State != idem.Done || r.Fingerprint != "fp" || string(r.Result) != "ch_1" || r.Expires.IsZero() {
		t.Fatalf("Lookup(done hash) = %+v, %v", r, err)
	}
	r, err = s.Lookup(ctx, running)
	if err != nil || r.State != idem.InProgress || r.Fingerprint != "fp2" {
		t.Fatalf("Lookup(running hash) = %+v, %v", r, err)
	}
	if err := s.Forget(ctx, running, false); !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("unforced Forget(running hash) = %v, want ErrInProgress", err)
	}
	for _, k := range []string{done, running} {
		if err := s.Forget(ctx, k, true); err != nil {
			t.Fatalf("Forget(%q): %v", k, err)
		}
		if n := c.Exists(ctx, s.RecordKey(k)).Val(); n != 0 {
			t.Fatalf("%q still exists after Forget", k)
		}
	}
}
