package sqlinbox_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/deduptest"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

type backend struct {
	name, driver string
	dsn          func(t *testing.T) string
}

var backends = []backend{
	{"postgres", "pgx", func(t *testing.T) string { return testsvc.PostgresURL(t) }},
	{"sqlite", "sqlite", func(t *testing.T) string {
		return "file:" + filepath.Join(t.TempDir(), "inbox.db") + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	}},
	// MariaDB under both isolation levels a MySQL user runs.
	{"mysql-read-committed", "mysql", func(t *testing.T) string {
		return testsvc.MySQL(t, testsvc.MySQLIsolation(t, "READ-COMMITTED")...)
	}},
	{"mysql-repeatable-read", "mysql", func(t *testing.T) string {
		return testsvc.MySQL(t, testsvc.MySQLIsolation(t, "REPEATABLE-READ")...)
	}},
}

func forEach(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b)
		})
	}
}

// env is an inbox and a ledger table, unique to the test, dropped at the end.
type env struct {
	mysql  bool // ? instead of $1 in the tests' own statements
	db     *sql.DB
	in     *sqlinbox.Inbox
	table  string
	ledger string
}

func newEnv(t *testing.T, b backend, opts ...sqlinbox.Option) *env {
	t.Helper()
	db, err := sql.Open(b.driver, b.dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	e := &env{mysql: b.driver == "mysql", db: db, table: "inbox_" + hex.EncodeToString(r[:]), ledger: "ledger_" + hex.EncodeToString(r[:])}
	e.in, err = sqlinbox.New(db, append([]sqlinbox.Option{sqlinbox.WithTable(e.table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.in.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.in.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+e.ledger+" (msg VARCHAR(1024) NOT NULL, amount BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{e.table, e.ledger} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + tb); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
		_ = db.Close()
	})
	return e
}

// pay is the business write: a ledger row, in the inbox's transaction.
func (e *env) pay(ctx context.Context, tx *sql.Tx, m dedup.Message) error {
	_, err := tx.ExecContext(ctx, e.q("INSERT INTO "+e.ledger+" (msg, amount) VALUES ($1, 100)"), m.ID)
	return err
}

// q is a statement of the tests' own, written with $1, for e's database.
func (e *env) q(s string) string {
	if e.mysql {
		return strings.ReplaceAll(s, "$1", "?")
	}
	return s
}

func (e *env) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(e.q(q), args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) rows(t *testing.T, id string) (ledger, inbox int) {
	t.Helper()
	return e.count(t, "SELECT COUNT(*) FROM "+e.ledger+" WHERE msg = $1", id),
		e.count(t, "SELECT COUNT(*) FROM "+e.table+" WHERE msg_id = $1", id)
}

// txHandler is a handler in the transaction of an Inbox (Tx *sql.Tx) or of a
// PgxInbox (Tx pgx.Tx).
type txHandler[Tx any] = func(ctx context.Context, tx Tx, m dedup.Message) error

// processor is the Process of an Inbox or a PgxInbox.
type processor[Tx any] = func(ctx context.Context, m dedup.Message, h txHandler[Tx]) (dedup.Outcome, error)

// process is in.Process as a processor.
func process(in *sqlinbox.Inbox) processor[*sql.Tx] {
	return func(ctx context.Context, m dedup.Message, h txHandler[*sql.Tx]) (dedup.Outcome, error) {
		return in.Process(ctx, m, h)
	}
}

// payOnce delivers m to process twice: the first delivery pays, the second
// is a duplicate; e then holds one payment and one inbox row for m.
func payOnce[Tx any](ctx context.Context, t *testing.T, e *env, process processor[Tx], pay txHandler[Tx], m dedup.Message) {
	t.Helper()
	if o, err := process(ctx, m, pay); o != dedup.OutcomeProcessed || err != nil {
		t.Fatalf("delivery of %s: %v, %v; want processed", m.ID, o, err)
	}
	if o, err := process(ctx, m, pay); o != dedup.OutcomeDuplicate || err != nil {
		t.Fatalf("redelivery of %s: %v, %v; want duplicate", m.ID, o, err)
	}
	if l, i := e.rows(t, m.ID); l != 1 || i != 1 {
		t.Fatalf("ledger %d, inbox %d rows; want 1 and 1", l, i)
	}
}

// rollsBack delivers m to process with a handler that pays and then returns
// fail's error, and checks that Process failed with want and left neither
// the payment nor the id.
func rollsBack[Tx any](ctx context.Context, t *testing.T, e *env, process processor[Tx], pay txHandler[Tx], m dedup.Message, fail func(context.Context) error, want error) {
	t.Helper()
	o, err := process(ctx, m, func(ctx context.Context, tx Tx, m dedup.Message) error {
		if err := pay(ctx, tx, m); err != nil {
			return err
		}
		return fail(ctx)
	})
	if o != dedup.OutcomeFailed || !errors.Is(err, want) {
		t.Fatalf("handler failing after its write: %v, %v; want failed with %v", o, err, want)
	}
	if l, i := e.rows(t, m.ID); l != 0 || i != 0 {
		t.Fatalf("after rollback: ledger %d, inbox %d rows; want none", l, i)
	}
}

var errBoom = errors.New("boom after the write")

// failWithBoom is a handler's failure after its write.
func failWithBoom(context.Context) error { return errBoom }

// hang is a handler that hangs after its write until its context ends.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// The handler-level guarantees of the dedup contract.
func TestConformance(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		deduptest.RunHandler(t, func(t *testing.T, next dedup.Handler) dedup.Handler {
			return e.in.Wrap(func(ctx context.Context, _ *sql.Tx, m dedup.Message) error { return next(ctx, m) })
		})
	})
}

// The effect and the dedup record commit together; a duplicate adds neither.
func TestCommitTogether(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		payOnce(t.Context(), t, e, process(e.in), e.pay, dedup.Message{ID: "pay-1"})
	})
}

// A handler that wrote its effect and then failed leaves neither the effect
// nor the id; the redelivery is processed.
func TestRollbackTogether(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		m := dedup.Message{ID: "pay-2"}
		rollsBack(t.Context(), t, e, process(e.in), e.pay, m, failWithBoom, errBoom)
		payOnce(t.Context(), t, e, process(e.in), e.pay, m)
	})
}

// A consumer whose handler hangs past the timeout (or whose caller gives up)
// rolls back: effect and id both vanish and the id is free again.
func TestTimeoutRollsBack(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, sqlinbox.WithTimeout(time.Second))
		m := dedup.Message{ID: "pay-3"}
		rollsBack(t.Context(), t, e, process(e.in), e.pay, m, hang, context.DeadlineExceeded)
		// The redelivery goes to a consumer without the short timeout, which
		// a loaded machine could exceed.
		redo, err := sqlinbox.New(e.db, sqlinbox.WithTable(e.table))
		if err != nil {
			t.Fatal(err)
		}
		payOnce(t.Context(), t, e, process(redo), e.pay, m)
	})
}

// Claim in the caller's own transaction: a rollback forgets the id.
func TestClaimInOwnTransaction(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		for _, commit := range []bool{false, true} {
			tx, err := e.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := e.in.Claim(ctx, tx, "own-tx")
			if err != nil || !fresh {
				t.Fatalf("Claim (commit=%v): %v, %v; want fresh", commit, fresh, err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		tx, _ := e.db.BeginTx(ctx, nil)
		defer tx.Rollback()
		if fresh, err := e.in.Claim(ctx, tx, "own-tx"); err != nil || fresh {
			t.Fatalf("Claim after a commit: %v, %v; want duplicate", fresh, err)
		}
		if _, err := e.in.Claim(ctx, tx, ""); !errors.Is(err, dedup.ErrInvalidID) {
			t.Fatalf("empty id: %v, want ErrInvalidID", err)
		}
	})
}

// 100 payments, each delivered once to three times in random order by six
// consumers; 30% of handler runs fail after writing to the ledger. The
// ledger sum proves each took effect exactly once, none lost.
func TestLedgerExactlyOnce(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ledgerExactlyOnce(t, e, e.in.Wrap(failAfterWrite(e.pay)))
	})
}

// failAfterWrite is pay failing, after its write, on 30% of its runs.
func failAfterWrite[Tx any](pay func(context.Context, Tx, dedup.Message) error) func(context.Context, Tx, dedup.Message) error {
	return func(ctx context.Context, tx Tx, m dedup.Message) error {
		if err := pay(ctx, tx, m); err != nil {
			return err
		}
		if mrand.IntN(10) < 3 {
			return errors.New("fail after the write")
		}
		return nil
	}
}

// ledgerExactlyOnce delivers 100 payments, each one to three times in
// random order, to six consumers that run h on each until it may be
// acknowledged, and checks that e's ledger and inbox hold each once.
func ledgerExactlyOnce(t *testing.T, e *env, h dedup.Handler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 100
	var queue []dedup.Message
	for i := range n {
		for range 1 + i%3 {
			queue = append(queue, dedup.Message{ID: fmt.Sprintf("pay-%d", i)})
		}
	}
	mrand.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
	ch := make(chan dedup.Message)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for m := range ch {
				for !dedup.ShouldAck(h(ctx, m)) && ctx.Err() == nil {
				}
			}
		})
	}
	for _, m := range queue {
		ch <- m
	}
	close(ch)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("timed out")
	}
	sum := e.count(t, "SELECT COALESCE(SUM(amount), 0) FROM "+e.ledger)
	rows := e.count(t, "SELECT COUNT(DISTINCT msg) FROM "+e.ledger)
	ids := e.count(t, "SELECT COUNT(*) FROM "+e.table)
	if sum != 100*n || rows != n || ids != n {
		t.Fatalf("ledger sum %d over %d messages, %d inbox ids; want %d, %d, %d", sum, rows, ids, 100*n, n, n)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		const retention = time.Second
		e := newEnv(t, b, sqlinbox.WithRetention(retention))
		ctx := context.Background()
		before := time.Now()
		for _, id := range []string{"a", "b"} {
			if _, err := e.in.Process(ctx, dedup.Message{ID: id}, e.pay); err != nil {
				t.Fatal(err)
			}
		}
		n, err := e.in.Purge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// One-sided: a loaded machine may reach this after the retention.
		if time.Since(before) < retention && n != 0 {
			t.Fatalf("Purge within retention deleted %d ids, want 0", n)
		}
		time.Sleep(retention + 100*time.Millisecond)
		m, err := e.in.Purge(ctx)
		if err != nil || n+m != 2 {
			t.Fatalf("Purge after retention: %d, %v; want %d (2 in all)", m, err, 2-n)
		}
	})
}

func TestNewRejectsBadArguments(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, opts := range map[string][]sqlinbox.Option{
		"injection": {sqlinbox.WithTable("inbox; DROP TABLE x")},
		"timeout":   {sqlinbox.WithTimeout(0)},
		"retention": {sqlinbox.WithRetention(-1)},
	} {
		if _, err := sqlinbox.New(db, opts...); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := sqlinbox.New(nil); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("nil db: %v, want ErrInvalid", err)
	}
}

// TestObserver: every Process call is told to the observer with the
// outcome and error it returned.
func TestObserver(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		var mu sync.Mutex
		var got []dedup.Event
		e := newEnv(t, b, sqlinbox.WithObserver(func(_ context.Context, ev dedup.Event) {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}))
		ctx := context.Background()
		boom := errors.New("boom")
		calls := []struct {
			id      string
			h       sqlinbox.TxHandler
			outcome dedup.Outcome
			err     error
		}{
			{"obs-1", e.pay, dedup.OutcomeProcessed, nil},
			{"obs-1", e.pay, dedup.OutcomeDuplicate, nil},
			{"obs-2", func(context.Context, *sql.Tx, dedup.Message) error { return boom }, dedup.OutcomeFailed, boom},
			{"", e.pay, dedup.OutcomeRejected, dedup.ErrInvalidID},
		}
		for _, c := range calls {
			o, err := e.in.Process(ctx, dedup.Message{ID: c.id}, c.h)
			if o != c.outcome || !errors.Is(err, c.err) {
				t.Fatalf("Process(%q) = %v, %v; want %v, %v", c.id, o, err, c.outcome, c.err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != len(calls) {
			t.Fatalf("observer told of %d calls, want %d", len(got), len(calls))
		}
		for i, c := range calls {
			if ev := got[i]; ev.Outcome != c.outcome || !errors.Is(ev.Err, c.err) || (c.err == nil) != (ev.Err == nil) || ev.StoreErr != nil {
				t.Errorf("event %d = %+v, want outcome %v, error %v", i, ev, c.outcome, c.err)
			}
		}
	})
}

// TestLongTablesKeepTheirOwnIndex: the purge index is named after the table
// (<table>_processed). On PostgreSQL an identifier longer than 63 bytes is
// cut short, so two long tables that differ only at the end would share one
// index name, and the second Migrate would skip its index. A table that
// leaves no room for the suffix is refused instead.
func TestLongTablesKeepTheirOwnIndex(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("pgx", testsvc.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var r [6]byte
	_, _ = rand.Read(r[:])
	base := "inbox_" + hex.EncodeToString(r[:]) + "_"
	base += strings.Repeat("x", 62-len(base))
	for _, table := range []string{base + "a", base + "b"} { // 63 bytes each
		t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
		in, err := sqlinbox.New(db, sqlinbox.WithTable(table))
		if errors.Is(err, dedup.ErrInvalid) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := in.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%processed_ms%'`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("table %s has %d purge indexes, want 1", table, n)
		}
	}
	short := base[:63-len("_processed")]
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + short) })
	if _, err := sqlinbox.New(db, sqlinbox.WithTable(short)); err != nil {
		t.Errorf("New(%d-byte table): %v", len(short), err)
	}
}
