package sqlinbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
)

// A message wrongly marked done is looked up and forgotten, and its next
// copy is processed; a message being processed is invisible to both.
func TestInspect(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := t.Context()
		m := dedup.Message{ID: deduptest.UniqueID(t)}
		if _, err := e.in.Lookup(ctx, m.ID); !errors.Is(err, dedup.ErrNotFound) {
			t.Fatalf("Lookup before processing = %v, want ErrNotFound", err)
		}
		before := time.Now()
		if o, err := e.in.Process(ctx, m, e.pay); o != dedup.OutcomeProcessed || err != nil {
			t.Fatal(o, err)
		}
		mk, err := e.in.Lookup(ctx, m.ID)
		if err != nil || mk.State != dedup.Done {
			t.Fatalf("Lookup after processing = %+v, %v", mk, err)
		}
		if mk.Marked.Before(before.Add(-2*time.Second)) || mk.Marked.After(time.Now().Add(2*time.Second)) ||
			mk.Expires.Sub(mk.Marked) != dedup.DefaultRetention {
			t.Errorf("marked %v, purged after %v; want now and a retention later", mk.Marked, mk.Expires)
		}
		if err := e.in.Forget(ctx, m.ID, false); err != nil {
			t.Fatal(err)
		}
		if o, err := e.in.Process(ctx, m, e.pay); o != dedup.OutcomeProcessed || err != nil {
			t.Fatalf("the copy after Forget: %v, %v; want processed", o, err)
		}
		if l, _ := e.rows(t, m.ID); l != 2 {
			t.Fatalf("ledger has %d rows, want 2: forgetting let the copy run again", l)
		}
		if err := e.in.Forget(ctx, deduptest.UniqueID(t), true); !errors.Is(err, dedup.ErrNotFound) {
			t.Fatalf("Forget of an unknown id = %v, want ErrNotFound", err)
		}

		if b.name != "postgres" {
			return // SQLite's single writer would make the lookup below wait for the transaction
		}
		checkRunningInvisible(t, e)
	})
}

// checkRunningInvisible checks that a message being processed, its row not
// yet committed, is neither looked up nor forgotten, and is done once its
// transaction commits.
func checkRunningInvisible(t *testing.T, e *env) {
	t.Helper()
	ctx := t.Context()
	running := dedup.Message{ID: deduptest.UniqueID(t)}
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.in.Process(context.Background(), running, func(ctx context.Context, tx *sql.Tx, m dedup.Message) error {
			close(inside)
			<-release
			return e.pay(ctx, tx, m)
		})
		done <- err
	}()
	<-inside
	if _, err := e.in.Lookup(ctx, running.ID); !errors.Is(err, dedup.ErrNotFound) {
		t.Errorf("Lookup of a message being processed = %v, want ErrNotFound (its row is not committed)", err)
	}
	if err := e.in.Forget(ctx, running.ID, true); !errors.Is(err, dedup.ErrNotFound) {
		t.Errorf("Forget of a message being processed = %v, want ErrNotFound", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if mk, err := e.in.Lookup(ctx, running.ID); err != nil || mk.State != dedup.Done {
		t.Fatalf("after commit: %+v, %v", mk, err)
	}
}

func TestInspectBadIDs(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		deduptest.CheckBadIDsRefused(t, newEnv(t, b).in)
	})
}
