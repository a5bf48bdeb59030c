//go:build linux

package outbox_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock/sqllock"
	"github.com/latchkey-go/latchkey/outbox"
)

// The end-to-end run's size.
const (
	e2eAccounts = 64 // ordering keys
	e2eShards   = 4  // topics, one consumer each, an account always on one
	e2eWriters  = 4
	// Chaos: at least minStrikes kills and freezes at random moments and
	// minBetween between publish and mark, at most maxStrikes in all.
	minStrikes = 8
	minBetween = 4
	maxStrikes = 40
	// maxIdleTicks bounds the strike intervals after the writers are done.
	maxIdleTicks = 30
)

// e2eChanges is how many business changes a run writes, a tenth rolled
// back: 10,000, or 3,000 under the race detector, which slows the writers,
// the relays and the consumers several times over.
var e2eChanges = map[bool]int{false: 10000, true: 3000}[raceDetector]

// TestEndToEndKillAndFreeze: 10,000 business changes, each with its
// message, written by four writer processes in PostgreSQL transactions of
// which a tenth roll back; two relay processes (this test binary re-executed)
// under one election on sqllock, the leader SIGKILLed or SIGSTOPped at
// random moments and also right between publishing and marking (the relay
// says "between" and pauses there); four deduplicating consumers
// (sqlinbox, the effect and the id in one transaction) that check each
// account's sequence. Every committed change takes effect exactly once,
// in its account's order; no rolled-back change is ever published.
func TestEndToEndKillAndFreeze(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run skipped in -short mode")
	}
	for _, b := range e2eBrokers {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			runE2E(t, b)
		})
	}
}

// e2e is one end-to-end run.
type e2e struct {
	t      *testing.T
	db     *sql.DB
	o      *outbox.Outbox
	name   string // the run's stream, queue and topic prefix
	config relayConfig

	duplicates atomic.Int64 // copies the inbox absorbed
	outOfOrder atomic.Int64
	firstBad   atomic.Value // string: the first order violation
}

func runE2E(t *testing.T, b e2eBroker) {
	url := e2eSchema(t)
	db := testsvc.OpenDB(t, "pgx", url)
	r := &e2e{t: t, db: db, name: "outbox_e2e_" + randomHex(t)}
	r.o = newOutbox(t, db, "outbox")
	r.exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, acct TEXT NOT NULL, amount BIGINT NOT NULL)`)
	r.exec(`CREATE TABLE effects (msg_id TEXT PRIMARY KEY, acct TEXT NOT NULL, seq BIGINT NOT NULL)`)
	r.exec(`CREATE TABLE applied (acct TEXT PRIMARY KEY, last_seq BIGINT NOT NULL)`)
	if _, err := sqllock.New(t.Context(), db, sqllock.Postgres); err != nil { // its tables, before the relays race to make them
		t.Fatal(err)
	}
	brokerURL := b.url(t)
	consume := b.prepare(t, brokerURL, r.name)
	r.config = relayConfig{PostgresURL: url, Table: "outbox", Broker: b.name, BrokerURL: brokerURL, Between: 0.1}

	ctx, cancel := context.WithCancel(context.Background())
	consumed := r.consume(ctx, consume)
	defer func() { cancel(); consumed.Wait() }()

	c := newChaos(t, r.config)
	var writers []*proc
	for w := range e2eWriters {
		writers = append(writers, startProc(t, "writer", w, writerConfig{PostgresURL: url, Table: "outbox", Name: r.name,
			Writer: w, Writers: e2eWriters, Changes: e2eChanges}, nil))
	}
	written := make(chan writeResult, 1)
	go func() { written <- r.write(writers) }()
	w := c.run(written)
	r.settle(len(w.committed), c)
	r.check(w)
	t.Logf("%s: %d changes, %d committed, %d rolled back; %d kills and %d freezes at random, %d kills and %d freezes between publish and mark; "+
		"%d terms, %d marks refused by the fence; %d duplicate deliveries absorbed by the inbox",
		b.name, e2eChanges, len(w.committed), len(w.rolledBack), c.kills, c.freezes, c.betweenKills, c.betweenFreezes,
		c.terms, c.fenced, r.duplicates.Load())
}

// e2eSchema makes a PostgreSQL schema for the run, dropped at cleanup, and
// returns the URL whose tables live in it.
func e2eSchema(t *testing.T) string {
	base := testsvc.PostgresURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	schema := "outbox_e2e_" + randomHex(t)
	if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = admin.Close()
	})
	return base + "&search_path=" + schema
}

func randomHex(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

func (r *e2e) exec(q string, args ...any) {
	r.t.Helper()
	if _, err := r.db.ExecContext(r.t.Context(), q, args...); err != nil {
		r.t.Fatal(err)
	}
}

// writeResult is what the writers did: the changes committed (the
// orders table holds them) and those rolled back (all the others).
type writeResult struct {
	committed, rolledBack map[string]bool
	err                   error
}

// writerConfig is what a writer process is told.
type writerConfig struct {
	PostgresURL, Table, Name string
	Writer, Writers, Changes int
}

// write runs the writer processes and waits for them.
func (r *e2e) write(processes []*proc) writeResult {
	res := writeResult{committed: map[string]bool{}, rolledBack: map[string]bool{}}
	var errs []error
	for _, p := range processes {
		<-p.done
		if p.err != nil {
			errs = append(errs, fmt.Errorf("writer %d: %w", p.slot, p.err))
		}
	}
	if res.err = errors.Join(errs...); res.err != nil {
		return res
	}
	rows, err := r.db.QueryContext(context.Background(), `SELECT id FROM orders`)
	if err != nil {
		res.err = err
		return res
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if res.err = rows.Scan(&id); res.err != nil {
			return res
		}
		res.committed[id] = true
	}
	for i := range e2eChanges {
		if id := changeID(i); !res.committed[id] {
			res.rolledBack[id] = true
		}
	}
	return res
}

func changeID(i int) string { return fmt.Sprintf("chg-%05d", i) }

// writerProcess writes its share of the changes: each inserts an order and
// adds its message in one transaction, a tenth rolled back.
func writerProcess(raw string) error {
	var c writerConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return err
	}
	db, err := sql.Open("pgx", c.PostgresURL)
	if err != nil {
		return err
	}
	defer db.Close()
	o, err := outbox.New(db, outbox.WithTable(c.Table))
	if err != nil {
		return err
	}
	for i := c.Writer; i < c.Changes; i += c.Writers {
		if err := change(db, o, c.Name, i, mrand.IntN(10) != 0); err != nil {
			return err
		}
	}
	return nil
}

// change writes one change, again after a deadlock or serialization
// failure.
func change(db *sql.DB, o *outbox.Outbox, name string, i int, commit bool) error {
	ctx := context.Background()
	id, key := changeID(i), fmt.Sprintf("acct-%02d", i%e2eAccounts)
	topic := fmt.Sprintf("%s.%d", name, i%e2eAccounts%e2eShards)
	return inTx(ctx, db, id, commit, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, acct, amount) VALUES ($1, $2, 10)`, id, key); err != nil {
			return err
		}
		_, err := o.Add(ctx, tx, outbox.Message{ID: id, Topic: topic, Key: key, Payload: []byte(id)})
		return err
	})
}

// consume runs one deduplicating consumer per shard until ctx is done.
func (r *e2e) consume(ctx context.Context, consume consumeFunc) *sync.WaitGroup {
	inbox, err := sqlinbox.New(r.db, sqlinbox.WithTable("inbox"), sqlinbox.WithObserver(func(_ context.Context, e dedup.Event) {
		if e.Outcome == dedup.OutcomeDuplicate {
			r.duplicates.Add(1)
		}
	}))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := inbox.Migrate(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
	h := inbox.Wrap(r.apply)
	var wg sync.WaitGroup
	for shard := range e2eShards {
		wg.Go(func() {
			if err := consume(ctx, shard, h); err != nil && ctx.Err() == nil {
				r.t.Errorf("consumer %d: %v", shard, err)
			}
		})
	}
	return &wg
}

// apply is the business effect of a message, in the inbox's transaction:
// it records the effect and checks the account's order.
func (r *e2e) apply(ctx context.Context, tx *sql.Tx, m dedup.Message) error {
	acct := m.Header[outbox.HeaderKey]
	seq, err := strconv.ParseInt(m.Header[outbox.HeaderSeq], 10, 64)
	if err != nil {
		return fmt.Errorf("%s: %w", m.ID, err)
	}
	var last int64
	err = tx.QueryRowContext(ctx, `SELECT last_seq FROM applied WHERE acct = $1 FOR UPDATE`, acct).Scan(&last)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if seq != last+1 {
		r.outOfOrder.Add(1)
		r.firstBad.CompareAndSwap(nil, fmt.Sprintf("%s: %s seq %d took effect after seq %d", acct, m.ID, seq, last))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO applied (acct, last_seq) VALUES ($1, $2)
ON CONFLICT (acct) DO UPDATE SET last_seq = excluded.last_seq`, acct, seq); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO effects (msg_id, acct, seq) VALUES ($1, $2, $3)`, m.ID, acct, seq)
	return err
}

// settle waits, at most a minute, until nothing is pending and every
// committed change took effect.
func (r *e2e) settle(committed int, c *chaos) {
	r.t.Helper()
	for range 600 {
		c.drain()
		s, err := r.o.Stats(r.t.Context())
		if err != nil {
			r.t.Fatal(err)
		}
		if s.Pending == 0 && r.count(`SELECT COUNT(*) FROM effects`) >= committed {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s, _ := r.o.Stats(r.t.Context())
	r.t.Fatalf("not settled after a minute: %+v, %d of %d effects", s, r.count(`SELECT COUNT(*) FROM effects`), committed)
}

func (r *e2e) count(q string) int {
	var n int
	if err := r.db.QueryRowContext(r.t.Context(), q).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// check compares the effects with what was committed.
func (r *e2e) check(w writeResult) {
	r.t.Helper()
	effects := map[string]bool{}
	rows, err := r.db.QueryContext(r.t.Context(), `SELECT msg_id FROM effects`)
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			r.t.Fatal(err)
		}
		effects[id] = true
		if !w.committed[id] {
			r.t.Errorf("%s took effect but was not committed (rolled back: %v)", id, w.rolledBack[id])
		}
	}
	for id := range w.committed {
		if !effects[id] {
			r.t.Errorf("committed %s never took effect", id)
		}
	}
	if n := r.outOfOrder.Load(); n > 0 {
		r.t.Errorf("%d effects out of their account's order; first: %v", n, r.firstBad.Load())
	}
	if n := r.count(`SELECT COUNT(*) FROM outbox`); n != len(w.committed) {
		r.t.Errorf("%d messages in the outbox for %d committed changes", n, len(w.committed))
	}
}
