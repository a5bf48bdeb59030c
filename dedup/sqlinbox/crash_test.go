package sqlinbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/internal/dedupdrill"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

func TestMain(m *testing.M) { dedupdrill.Main(m, crashRole) }

// Where the child consumer is killed.
const (
	killInTx      = "in-tx"      // inbox: effect and id written, not committed
	killCommitted = "committed"  // inbox: committed, message not acknowledged
	killRedisMark = "redis-mark" // Redis mark: effect committed, id not marked done
)

// crashSpec is what the parent tells the child consumer.
type crashSpec struct {
	Point         string
	DSN           string
	Inbox, Ledger string
	ID            string
	Redis, Prefix string        // killRedisMark only
	TTL           time.Duration // killRedisMark only
}

var crashRole = dedupdrill.Role{Name: "sqlinbox-crash", Run: runCrashChild}

// runCrashChild processes one message and stops for good at the spec's
// point, saying so, until the parent kills it.
func runCrashChild(ctx context.Context, arg string) error {
	var s crashSpec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		return err
	}
	db, err := sql.Open("pgx", s.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	m := dedup.Message{ID: s.ID}
	insert := "INSERT INTO " + s.Ledger + " (msg, amount) VALUES ($1, 100)"
	in, err := sqlinbox.New(db, sqlinbox.WithTable(s.Inbox))
	if err != nil {
		return err
	}
	switch s.Point {
	case killInTx:
		_, err = in.Process(ctx, m, func(ctx context.Context, tx *sql.Tx, m dedup.Message) error {
			if _, err := tx.ExecContext(ctx, insert, m.ID); err != nil {
				return err
			}
			dedupdrill.Say("written")
			time.Sleep(time.Hour) // SIGKILLed here, before the commit
			return nil
		})
	case killCommitted:
		var o dedup.Outcome
		if o, err = in.Process(ctx, m, func(ctx context.Context, tx *sql.Tx, m dedup.Message) error {
			_, err := tx.ExecContext(ctx, insert, m.ID)
			return err
		}); err == nil {
			dedupdrill.Say("committed %v", o)
			time.Sleep(time.Hour) // SIGKILLed here, before the broker's ack
		}
	case killRedisMark:
		c := redis.NewClient(&redis.Options{Addr: s.Redis})
		defer c.Close()
		d, derr := dedup.New(redisstore.New(c, redisstore.WithPrefix(s.Prefix)), dedup.WithProcessingTTL(s.TTL))
		if derr != nil {
			return derr
		}
		_, err = d.Process(ctx, m, func(ctx context.Context, m dedup.Message) error {
			if _, err := db.ExecContext(ctx, insert, m.ID); err != nil {
				return err
			}
			dedupdrill.Say("committed")
			time.Sleep(time.Hour) // SIGKILLed here, before Done
			return nil
		})
	default:
		err = fmt.Errorf("unknown kill point %q", s.Point)
	}
	if err == nil {
		err = errors.New("returned from a point it should have been killed at")
	}
	return err
}

// TestCrashBetweenEffectAndDone kills a consumer process (SIGKILL) after its
// business write and before the message counts as done, and redelivers the
// message to another consumer. With the transactional inbox the business
// write and the dedup record are one transaction, so there is no such
// moment: killed before the commit, nothing happened and the redelivery runs
// the effect once; killed after it, both happened and the redelivery is a
// duplicate. The ledger holds exactly one payment either way.
//
// The last subtest shows why a dedup mark kept apart from the business data
// (Redis here) cannot give that: the effect commits in the database, the
// process dies before the mark reaches Redis, the claim expires, and the
// redelivery pays again. No ordering of two separate writes closes that
// window; only committing them together does. (The broker crash drills of
// redisconsumer, natsconsumer and amqpconsumer therefore kill their consumers only
// before the effect.)
func TestCrashBetweenEffectAndDone(t *testing.T) {
	t.Parallel()
	if pg := backends[0]; pg.name != "postgres" {
		t.Fatalf("backends[0] is %s, want postgres", pg.name)
	}
	t.Run("before commit: the redelivery runs it once", crashBeforeCommit)
	t.Run("after commit: the redelivery is a duplicate", crashAfterCommit)
	t.Run("a Redis mark apart from the data repeats the effect", crashBeforeRedisMark)
}

// startCrash starts a child consumer of s on a new env on PostgreSQL and
// returns the env, the child, the message it processes and a context for
// the drill.
func startCrash(t *testing.T, s crashSpec) (*env, *dedupdrill.Child, dedup.Message, context.Context) {
	t.Helper()
	pg := backends[0]
	e := newEnv(t, pg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s.DSN, s.Inbox, s.Ledger, s.ID = pg.dsn(t), e.table, e.ledger, "pay-"+s.Point
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return e, dedupdrill.StartChild(t, crashRole.Name, string(raw)), dedup.Message{ID: s.ID}, ctx
}

func crashBeforeCommit(t *testing.T) {
	t.Parallel()
	e, child, m, ctx := startCrash(t, crashSpec{Point: killInTx})
	child.Expect(t, "written", 30*time.Second)
	if l, i := e.rows(t, m.ID); l != 0 || i != 0 {
		t.Fatalf("uncommitted work visible: ledger %d, inbox %d rows", l, i)
	}
	// While the child lives, its uncommitted row is the claim: a copy
	// delivered meanwhile waits on it and settles nothing.
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	o, err := e.in.Process(wctx, m, e.pay)
	cancel()
	if o != dedup.OutcomeRejected || err == nil {
		t.Fatalf("copy delivered while the child held the row: %v, %v; want rejected by its deadline", o, err)
	}
	child.Kill(t)
	// PostgreSQL rolls the dead connection's transaction back; the
	// redelivery then takes the id.
	payOnce(ctx, t, e, process(e.in), e.pay, m)
}

func crashAfterCommit(t *testing.T) {
	t.Parallel()
	e, child, m, ctx := startCrash(t, crashSpec{Point: killCommitted})
	if got := child.Expect(t, "committed", 30*time.Second); got != dedup.OutcomeProcessed.String() {
		t.Fatalf("child: %s, want processed", got)
	}
	child.Kill(t)
	if o, err := e.in.Process(ctx, m, e.pay); o != dedup.OutcomeDuplicate || err != nil {
		t.Fatalf("redelivery after the kill: %v, %v; want duplicate", o, err)
	}
	if l, i := e.rows(t, m.ID); l != 1 || i != 1 {
		t.Fatalf("ledger %d, inbox %d rows; want 1 and 1", l, i)
	}
}

func crashBeforeRedisMark(t *testing.T) {
	t.Parallel()
	addr, prefix := testsvc.RedisAddr(t), testsvc.KeyPrefix(t)
	const ttl = 2 * time.Second // long enough for the child to commit its effect on a loaded machine
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() {
		c.Del(context.Background(), redisstore.New(c, redisstore.WithPrefix(prefix)).RecordKey("pay-"+killRedisMark))
		c.Close()
	})
	e, child, m, ctx := startCrash(t, crashSpec{Point: killRedisMark, Redis: addr, Prefix: prefix, TTL: ttl})
	child.Expect(t, "committed", 30*time.Second)
	child.Kill(t)
	d, err := dedup.New(redisstore.New(c, redisstore.WithPrefix(prefix)), dedup.WithProcessingTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	pay := func(ctx context.Context, m dedup.Message) error {
		_, err := e.db.ExecContext(ctx, "INSERT INTO "+e.ledger+" (msg, amount) VALUES ($1, 100)", m.ID)
		return err
	}
	// Redeliver until settled: busy until the dead child's claim expires.
	for {
		o, err := d.Process(ctx, m, pay)
		if o == dedup.OutcomeProcessed && err == nil {
			break
		}
		if o != dedup.OutcomeBusy || ctx.Err() != nil {
			t.Fatalf("redelivery: %v, %v", o, err)
		}
		time.Sleep(min(max(dedup.RetryAfter(err), 10*time.Millisecond), 100*time.Millisecond))
	}
	if l := e.count(t, "SELECT COUNT(*) FROM "+e.ledger+" WHERE msg = $1", m.ID); l != 2 {
		t.Fatalf("ledger %d rows; a mark kept apart from the data must let the effect repeat (2 rows)", l)
	}
	t.Logf("killed between its committed effect and its Redis mark, the consumer's message was paid twice")
}
