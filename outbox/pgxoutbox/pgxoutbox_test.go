package pgxoutbox_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/outbox"
	"github.com/latchkey-go/latchkey/outbox/pgxoutbox"
)

// TestAddInPgxTx: messages added in a pgx transaction are published when
// it commits, never when it rolls back, and a key's in order.
func TestAddInPgxTx(t *testing.T) {
	url, drop := testsvc.ExamplePostgres()
	defer drop()
	testsvc.PostgresURL(t) // skips or fails when the server is missing
	ctx := t.Context()
	pool := testsvc.OpenPgx(t, url)
	ob, err := pgxoutbox.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for i, commit := range []bool{true, false, true, true} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := pgxoutbox.Add(ctx, ob, tx, outbox.Message{ID: []string{"a", "b", "c", "d"}[i], Topic: "t", Key: "k"})
			if err == nil && !commit {
				err = errors.New("rolled back")
			}
			return err
		})
		if err != nil && commit {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []string
	e, _ := elect.New(memlock.New(), "relay")
	relay, err := outbox.NewRelay(ob, e, outbox.PublisherFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m.ID+":"+strconv.FormatInt(m.Seq, 10))
		return nil
	}), outbox.WithPollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = relay.Run(rctx, "relay-1") }()
	for range 300 {
		if s, err := ob.Stats(ctx); err == nil && s.Pending == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if want := "a:1 c:2 d:3"; strings.Join(got, " ") != want {
		t.Fatalf("published %v, want %s", got, want)
	}
}
