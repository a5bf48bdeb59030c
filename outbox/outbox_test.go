package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/outbox"
)

// addMessages writes n messages over keys from several goroutines, each in
// a transaction of its own, a fifth of them rolled back. It returns the ids
// committed and those rolled back.
func addMessages(t *testing.T, db *sql.DB, o *outbox.Outbox, n int, keys []string) (committed, rolledBack map[string]bool) {
	t.Helper()
	committed, rolledBack = map[string]bool{}, map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				id := fmt.Sprintf("m-%d", i)
				commit := rand.IntN(5) != 0
				if err := addOne(t.Context(), db, o, id, keys[i%len(keys)], commit); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				map[bool]map[string]bool{true: committed, false: rolledBack}[commit][id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return committed, rolledBack
}

// addOne adds one message in a transaction it commits or rolls back,
// again after a deadlock or serialization failure.
func addOne(ctx context.Context, db *sql.DB, o *outbox.Outbox, id, key string, commit bool) error {
	return inTx(ctx, db, id, commit, func(tx *sql.Tx) error {
		_, err := o.Add(ctx, tx, outbox.Message{ID: id, Topic: "orders", Key: key, Payload: []byte(id), Headers: map[string]string{"Kind": "order"}})
		return err
	})
}

// runRelay runs a relay of o to p under an in-memory election until stop
// is called.
func runRelay(t *testing.T, o *outbox.Outbox, p outbox.Publisher, opts ...outbox.RelayOption) (stop func()) {
	t.Helper()
	e, err := elect.New(memlock.New(), "relay", elect.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]outbox.RelayOption{outbox.WithPollInterval(20 * time.Millisecond), outbox.WithBackoff(10*time.Millisecond, 100*time.Millisecond)}, opts...)
	r, err := outbox.NewRelay(o, e, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, "relay-1") }()
	return func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	}
}

// drained waits until nothing is pending, for at most 30 s.
func drained(t *testing.T, o *outbox.Outbox) outbox.Stats {
	t.Helper()
	for range 600 {
		s, err := o.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s.Pending == 0 {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("messages still pending after 30 s")
	return outbox.Stats{}
}

// TestRelayPublishesCommittedInOrder: messages of committed transactions
// are published, each key's in sequence, while the broker refuses a fifth
// of the publications at random; none of a rolled-back transaction is.
func TestRelayPublishesCommittedInOrder(t *testing.T) {
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			db, table := openDB(t, d)
			o := newOutbox(t, db, table)
			p := &recorder{fail: func(outbox.Message) bool { return rand.IntN(5) == 0 }}
			stop := runRelay(t, o, p)
			committed, rolledBack := addMessages(t, db, o, 300, []string{"acct-1", "acct-2", "acct-3", "acct-4", "acct-5"})
			s := drained(t, o)
			stop()
			checkPublished(t, p.published(), committed, rolledBack)
			if s.Published != int64(len(committed)) || s.Token == 0 || s.Leader != "relay-1" {
				t.Errorf("stats %+v, want %d published and relay-1 with a token", s, len(committed))
			}
		})
	}
}

// checkPublished checks that every committed message and nothing else was
// published, and that each key's first publications run 1, 2, 3, ...
func checkPublished(t *testing.T, got []outbox.Message, committed, rolledBack map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	next := map[string]int64{}
	for _, m := range got {
		if rolledBack[m.ID] || !committed[m.ID] {
			t.Fatalf("published %s, which was not committed", m.ID)
		}
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		if m.Seq != next[m.Key]+1 {
			t.Fatalf("key %s: published seq %d after %d", m.Key, m.Seq, next[m.Key])
		}
		next[m.Key] = m.Seq
		if string(m.Payload) != m.ID || m.Headers["Kind"] != "order" || m.Topic != "orders" {
			t.Fatalf("message %s came back as %+v", m.ID, m)
		}
	}
	if len(seen) != len(committed) {
		t.Fatalf("%d of %d committed messages published", len(seen), len(committed))
	}
}

// TestDeposedRelayCannotMarkOrPurge: once a relay with a higher token has
// written, a relay with a lower one is refused both ways and changes
// nothing; the same token, and a higher one, are accepted.
func TestDeposedRelayCannotMarkOrPurge(t *testing.T) {
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			deposedRelay(t, d)
		})
	}
}

func deposedRelay(t *testing.T, d string) {
	db, table := openDB(t, d)
	o := newOutbox(t, db, table)
	ctx := t.Context()
	addMessages(t, db, o, 10, []string{"k"})
	before, err := o.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Purge(ctx, o, 10, "new", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.MarkPending(ctx, o, 9, "paused"); !errors.Is(err, outbox.ErrFenced) {
		t.Fatalf("mark with token 9 after 10 = %v, want ErrFenced", err)
	}
	if _, err := outbox.Purge(ctx, o, 5, "paused", time.Second); !errors.Is(err, outbox.ErrFenced) {
		t.Fatalf("purge with token 5 after 10 = %v, want ErrFenced", err)
	}
	after, err := o.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Pending != before.Pending || after.Token != 10 || after.Leader != "new" {
		t.Fatalf("after the refused writes: %+v, want %d pending, token 10 by new", after, before.Pending)
	}
	if _, err := outbox.MarkPending(ctx, o, 10, "new"); err != nil {
		t.Fatalf("mark with the same token: %v", err)
	}
	if s, _ := o.Stats(ctx); s.Pending != 0 || s.Published != before.Pending {
		t.Fatalf("after the mark: %+v", s)
	}
}

// TestRetentionPurge: the leader deletes what was published longer ago
// than the retention, and keeps the rest.
func TestRetentionPurge(t *testing.T) {
	db, table := openDB(t, "sqlite")
	o := newOutbox(t, db, table)
	committed, _ := addMessages(t, db, o, 20, []string{"k"})
	if _, err := outbox.MarkPending(t.Context(), o, 1, "r"); err != nil {
		t.Fatal(err)
	}
	if n, err := outbox.Purge(t.Context(), o, 1, "r", time.Hour); err != nil || n != 0 {
		t.Fatalf("purge of fresh messages = %d, %v", n, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if n, err := outbox.Purge(t.Context(), o, 1, "r", time.Second); err != nil || n != int64(len(committed)) {
		t.Fatalf("purge after the retention = %d, %v; want %d", n, err, len(committed))
	}
}

// TestAddRefusesBadMessages: nothing is written for a bad message.
func TestAddRefusesBadMessages(t *testing.T) {
	db, table := openDB(t, "sqlite")
	o := newOutbox(t, db, table)
	for _, m := range []outbox.Message{
		{},
		{Topic: "t", ID: "a\x01b"},
		{Topic: "t\n"},
		{Topic: "t", Key: string(make([]byte, outbox.MaxKeyLen+1))},
	} {
		if _, err := o.Add(t.Context(), db, m); !errors.Is(err, outbox.ErrInvalid) {
			t.Errorf("Add(%+v) = %v, want ErrInvalid", m, err)
		}
	}
	if s, err := o.Stats(t.Context()); err != nil || s.Pending != 0 {
		t.Fatalf("after refused adds: %+v, %v", s, err)
	}
	if _, err := outbox.New(db, outbox.WithTable("bad name")); !errors.Is(err, outbox.ErrInvalid) {
		t.Errorf("bad table: %v", err)
	}
}

// TestFailingKeyHoldsBackOnlyItself: a key whose publications keep failing
// and whose messages fill more than a batch holds back its own messages
// only; the others' are published.
func TestFailingKeyHoldsBackOnlyItself(t *testing.T) {
	db, table := openDB(t, "sqlite")
	o := newOutbox(t, db, table)
	for i := range 150 {
		if _, err := o.Add(t.Context(), db, outbox.Message{ID: fmt.Sprintf("poison-%d", i), Topic: "t", Key: "poison"}); err != nil {
			t.Fatal(err)
		}
	}
	committed, _ := addMessages(t, db, o, 100, []string{"a", "b"})
	p := &recorder{fail: func(m outbox.Message) bool { return m.Key == "poison" }}
	stop := runRelay(t, o, p, outbox.WithBatchSize(100))
	defer stop()
	var s outbox.Stats
	for range 600 {
		var err error
		if s, err = o.Stats(t.Context()); err != nil || s.Pending == 150 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s.Pending != 150 {
		t.Fatalf("%d pending, want the 150 of the failing key", s.Pending)
	}
	checkPublished(t, p.published(), committed, nil)
}

// A failed publication reaches the error handler as a *PublishError naming
// its message, and the end of the relay's term reaches OnTermEnd with the
// term, so an operator's alerting sees both.
func TestErrorHandlerAndTermEnd(t *testing.T) {
	db, table := openDB(t, "sqlite")
	o := newOutbox(t, db, table)
	if _, err := o.Add(t.Context(), db, outbox.Message{ID: "poison-1", Topic: "t", Key: "poison"}); err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 100)
	var mu sync.Mutex
	var terms []*elect.Term
	p := &recorder{fail: func(m outbox.Message) bool { return m.Key == "poison" }}
	stop := runRelay(t, o, p,
		outbox.WithErrorHandler(func(_ context.Context, err error) {
			select {
			case failed <- err:
			default:
			}
		}),
		outbox.OnTermEnd(func(term *elect.Term, _ error) {
			mu.Lock()
			terms = append(terms, term)
			mu.Unlock()
		}))
	select {
	case err := <-failed:
		var pe *outbox.PublishError
		if !errors.As(err, &pe) || pe.Message.ID != "poison-1" || pe.Err == nil {
			t.Errorf("error handler got %v, want a *PublishError of poison-1", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the error handler heard of no failed publication in 30 s")
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(terms) == 0 || terms[len(terms)-1] == nil {
		t.Fatalf("OnTermEnd got %v after Run returned, want the ended term", terms)
	}
}
