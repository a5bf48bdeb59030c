// Package dedupdrill is the crash drill every broker adapter of dedup runs
// against its real broker: thousands of messages, each published once or
// twice, consumed by two consumer processes at once, handlers failing at
// random, and one consumer process SIGKILLed in the middle of its handlers.
// At the end every message took effect exactly once (a ledger sum checks it)
// and none is lost.
//
// An adapter describes itself as a [Target]; its test package hands TestMain
// to [Main] with the target's [Target.Role], so the test binary can be
// re-executed as the second consumer process:
//
//	func TestMain(m *testing.M) { dedupdrill.Main(m, target.Role()) }
//
//	func TestCrashExactlyOnce(t *testing.T) {
//		dedupdrill.Run(t, target, config, dedupdrill.Options{})
//	}
//
// The deduplicator is a dedup.Deduper on dedup/redisstore and the business effect
// is a Redis transaction (ledger sum plus a per-id count), so both processes
// share them. The dedup mark and the effect are separate writes: a consumer
// killed between them would, once its claim expired, have the effect run
// again. That gap is inherent to any dedup store apart from the business
// data (dedup/sqlinbox closes it by committing both in one transaction), so
// the drill kills the child only where no handler of it stands between effect
// and mark: once half the ids have taken effect, one of its handlers blocks
// before its effect, the others block at the same point, and the child says
// so (and is killed) only when no effect of it is awaiting its mark.
// Injected failures also come before the effect.
package dedupdrill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// HeaderCopy is set on each published message: "1" on an id's first copy, "2"
// on its second. A target may publish the two copies differently (under
// another broker message id, say); the deduplicator does not read it.
const HeaderCopy = "Drill-Copy"

// A Target is one broker adapter, driven the same way in the test process and
// in the child consumer process.
type Target struct {
	// Name identifies the target to the child: unique within the test
	// binary, without spaces.
	Name string
	// Publish sends msgs, in order, to the broker resources config names
	// (config is the test's, as JSON: a stream, a queue, an address; read
	// it with [Config]). It runs in the
	// test process only, before any consumer starts, and must return only
	// once the broker holds every message.
	Publish func(ctx context.Context, config string, msgs []dedup.Message) error
	// Consume runs the adapter's consumers of config with h, as many at once
	// as the target likes, until ctx is done; then it returns ctx.Err() or
	// nil. proc ("parent" or "child") tells the two processes apart, for
	// consumer names. It runs in both processes.
	Consume func(ctx context.Context, config, proc string, h dedup.Handler) error
	// Drained reports whether the broker has no message of config left to
	// deliver or awaiting an acknowledgement, as far as it can tell. The
	// drill also waits for the test process's handlers to have been idle for
	// a while, for brokers that cannot see deliveries prefetched by a
	// consumer.
	Drained func(ctx context.Context, config string) (bool, error)
}

// Role is the child's part for t, to pass to Main.
func (t Target) Role() Role {
	return Role{Name: "dedupdrill-" + t.Name, Run: func(ctx context.Context, arg string) error { return runChild(ctx, t, arg) }}
}

// Options shape one drill. The zero value is the full drill: 10,000 ids, 1 s
// claims, 10% failures.
type Options struct {
	// IDs is the number of distinct message ids; about half are published
	// twice. Default: 10,000.
	IDs int
	// TTL is the deduplicator's processing TTL: how long the ids the killed
	// child held stay blocked. Default: 1 second.
	TTL time.Duration
	// FailRate is the share of handler runs that fail (before the effect).
	// Default: 0.10.
	FailRate float64
	// KillAt is how many ids must have taken effect, in either process,
	// before the child blocks in its handlers and is killed. Default: IDs/2.
	KillAt int
	// Timeout bounds the whole drill. Default: 4 minutes.
	Timeout time.Duration
}

// Result is what a drill measured.
type Result struct {
	Messages       int           // published copies
	Publish        time.Duration // publishing them all
	Consume        time.Duration // from the first consumer's start until drained
	AfterKill      time.Duration // from the kill until drained
	ChildEffects   int64
	ParentEffects  int64
	Failures       int64 // injected handler failures, both processes
	ParentOutcomes map[string]int64
	Blocked        string        // the id whose handler the child was killed in
	BlockedBack    time.Duration // from the kill until Blocked took effect in the test process
}

// spec is what parent and child share.
type spec struct {
	Target   string
	Config   string
	Redis    string
	Prefix   string
	TTL      time.Duration
	FailRate float64
	KillAt   int
}

func (s spec) key(k string) string { return s.Prefix + k }

// Run runs the drill of t on the broker resources config names (fresh ones:
// the drill expects them empty) and fails the test unless every id took
// effect exactly once and the broker drained. The target's functions get
// config as JSON. It is skipped under -short.
func Run(t *testing.T, tg Target, config any, o Options) Result {
	t.Helper()
	if testing.Short() {
		t.Skip("crash drill")
	}
	o = o.withDefaults()
	rawConfig, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	s := spec{Target: tg.Name, Config: string(rawConfig), Redis: testsvc.RedisAddr(t), Prefix: testsvc.KeyPrefix(t),
		TTL: o.TTL, FailRate: o.FailRate, KillAt: o.KillAt}
	c := redis.NewClient(&redis.Options{Addr: s.Redis, PoolSize: 32})
	t.Cleanup(func() { deleteKeys(c, s.Prefix); _ = c.Close() })

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	msgs, want := plan(rand.New(rand.NewPCG(seed, 1)), o.IDs)
	r := Result{Messages: len(msgs)}
	start := time.Now()
	if err := tg.Publish(ctx, s.Config, msgs); err != nil {
		t.Fatalf("publish: %v", err)
	}
	r.Publish = time.Since(start)

	// The child consumer, then the parent once the child is under way, so
	// both consume.
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	child := StartChild(t, tg.Role().Name, string(raw))
	child.Expect(t, "consuming", 30*time.Second)
	for c.HGet(ctx, s.key("stats"), "effects:child").Val() == "" {
		if ctx.Err() != nil {
			t.Fatal("the child never took effect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	parent := newProc(s, c, "parent", 0)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- tg.Consume(runCtx, s.Config, "parent", parent.handler()) }()
	runWait := sync.OnceValue(func() error { return <-runDone })
	defer func() { stop(); _ = runWait() }()

	// Kill the child inside its handlers.
	r.Blocked = child.Expect(t, "blocked", o.Timeout)
	child.Kill(t)
	killed := time.Now()
	t.Logf("child SIGKILLed inside the handler of %s", r.Blocked)
	r.BlockedBack = waitDrained(ctx, t, c, s, tg, parent, o, r.Blocked, killed)
	r.Consume, r.AfterKill = time.Since(start), time.Since(killed)
	stop()
	if err := runWait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("parent's Consume: %v", err)
	}

	checkExactlyOnce(t, c, s, o.IDs, want)
	stats, _ := c.HGetAll(context.Background(), s.key("stats")).Result()
	num := func(k string) int64 { n, _ := strconv.ParseInt(stats[k], 10, 64); return n }
	r.ChildEffects, r.ParentEffects = num("effects:child"), num("effects:parent")
	r.Failures = num("failures:child") + num("failures:parent")
	r.ParentOutcomes = parent.outcomeCounts()
	if n := r.ParentOutcomes[dedup.OutcomeRejected.String()]; n != 0 {
		t.Errorf("%d deliveries rejected in the parent", n)
	}
	t.Logf("%d ids, %d messages (%d second copies): published in %v; drained %v after the child started, %v after the kill",
		o.IDs, r.Messages, r.Messages-o.IDs, r.Publish.Round(time.Millisecond), r.Consume.Round(time.Millisecond), r.AfterKill.Round(time.Millisecond))
	t.Logf("%s, which the child was killed holding, took effect %v after the kill", r.Blocked, r.BlockedBack.Round(time.Millisecond))
	t.Logf("effects: child %d, parent %d; injected failures %d; parent outcomes %v",
		r.ChildEffects, r.ParentEffects, r.Failures, r.ParentOutcomes)
	return r
}

// Config decodes the config a target's function is given into a C.
func Config[C any](raw string) (C, error) {
	var c C
	err := json.Unmarshal([]byte(raw), &c)
	return c, err
}

// withDefaults is o with each zero field set to its default.
func (o Options) withDefaults() Options {
	if o.IDs == 0 {
		o.IDs = 10000
	}
	if o.TTL == 0 {
		o.TTL = time.Second
	}
	if o.FailRate == 0 {
		o.FailRate = 0.10
	}
	if o.KillAt == 0 {
		o.KillAt = o.IDs / 2
	}
	if o.Timeout == 0 {
		o.Timeout = 4 * time.Minute
	}
	return o
}

// plan returns the messages of ids ids, about half of them twice, shuffled
// with their second copies, so two copies of an id are sometimes in one
// batch and sometimes far apart; and the ledger sum they make when each
// takes effect once.
func plan(rng *rand.Rand, ids int) (msgs []dedup.Message, want int64) {
	for i := range ids {
		m := dedup.Message{ID: fmt.Sprintf("pay-%05d", i), Body: []byte(strconv.Itoa(i + 1)), Header: map[string]string{HeaderCopy: "1"}}
		msgs = append(msgs, m)
		if rng.IntN(2) == 0 {
			m.Header = map[string]string{HeaderCopy: "2"}
			msgs = append(msgs, m)
		}
		want += int64(i + 1)
	}
	rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	return msgs, want
}

// waitDrained waits until every id took effect, the broker has nothing
// left, and the parent's handlers have been idle for a while. It returns
// how long after the kill the id blocked in the child took effect.
func waitDrained(ctx context.Context, t *testing.T, c *redis.Client, s spec, tg Target, parent *proc, o Options, blocked string, killed time.Time) time.Duration {
	t.Helper()
	const idle = 300 * time.Millisecond
	var back time.Duration
	for {
		if back == 0 && c.HGet(ctx, s.key("effects"), blocked).Val() == "1" {
			back = time.Since(killed)
		}
		n, err := c.HLen(ctx, s.key("effects")).Result()
		if err == nil && n == int64(o.IDs) && time.Since(parent.lastCall()) > idle {
			if ok, derr := tg.Drained(ctx, s.Config); derr == nil && ok && time.Since(parent.lastCall()) > idle {
				return back
			} else if derr != nil {
				err = derr
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("not drained after %v: %d of %d ids took effect (%v)", o.Timeout, n, o.IDs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkExactlyOnce checks that each of the ids took effect exactly once,
// none lost, and that the ledger sum is want.
func checkExactlyOnce(t *testing.T, c *redis.Client, s spec, ids int, want int64) {
	t.Helper()
	bg := context.Background()
	counts, err := c.HGetAll(bg, s.key("effects")).Result()
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range ids {
		id := fmt.Sprintf("pay-%05d", i)
		if n := counts[id]; n != "1" {
			if bad++; bad <= 10 {
				t.Errorf("%s took effect %q times, want 1", id, n)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d ids did not take effect exactly once", bad, ids)
	}
	if got, err := c.Get(bg, s.key("ledger")).Int64(); err != nil || got != want {
		t.Errorf("ledger %d (%v), want %d", got, err, want)
	}
}

func runChild(ctx context.Context, tg Target, arg string) error {
	var s spec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.Redis, PoolSize: 32})
	defer c.Close()
	p := newProc(s, c, "child", s.KillAt)
	Say("consuming")
	return tg.Consume(ctx, s.Config, "child", p.handler())
}

var errInjected = errors.New("dedupdrill: injected failure")

// proc is one consumer process's side of the drill.
type proc struct {
	s      spec
	c      *redis.Client
	d      *dedup.Deduper
	name   string
	killAt int          // child: block once this many ids took effect; 0: never
	total  atomic.Int64 // ids that took effect, as of this process's last effect

	mu      sync.Mutex
	gapDone *sync.Cond // signalled when inGap drops
	frozen  bool       // guarded by mu
	inGap   int        // handlers between effect and mark; guarded by mu

	last     atomic.Int64 // Unix nanoseconds of the last handler start or end
	outcomes [int(dedup.OutcomeRejected) + 1]atomic.Int64
}

func newProc(s spec, c *redis.Client, name string, killAt int) *proc {
	d, err := dedup.New(redisstore.New(c, redisstore.WithPrefix(s.key("dedup:"))),
		dedup.WithProcessingTTL(s.TTL), dedup.WithRetention(10*time.Minute))
	if err != nil {
		panic(err) // the options are constants
	}
	p := &proc{s: s, c: c, d: d, name: name, killAt: killAt}
	p.gapDone = sync.NewCond(&p.mu)
	p.last.Store(time.Now().UnixNano())
	return p
}

func (p *proc) lastCall() time.Time { return time.Unix(0, p.last.Load()) }

func (p *proc) outcomeCounts() map[string]int64 {
	m := map[string]int64{}
	for o := dedup.OutcomeProcessed; o <= dedup.OutcomeRejected; o++ {
		m[o.String()] = p.outcomes[o].Load()
	}
	return m
}

// handler is the consumer's handler: a Deduper around the effect.
func (p *proc) handler() dedup.Handler {
	return func(ctx context.Context, m dedup.Message) error {
		p.last.Store(time.Now().UnixNano())
		defer func() { p.last.Store(time.Now().UnixNano()) }()
		entered := false
		o, err := p.d.Process(ctx, m, func(ctx context.Context, m dedup.Message) error {
			if rand.Float64() < p.s.FailRate {
				p.c.HIncrBy(ctx, p.s.key("stats"), "failures:"+p.name, 1)
				return errInjected
			}
			p.enter(m)
			entered = true
			return p.effect(ctx, m)
		})
		if entered {
			p.leave()
		}
		p.outcomes[o].Add(1)
		return err
	}
}

// enter is called before the effect. In the child, once killAt ids have taken
// effect, it blocks for good: the first caller waits until no handler stands
// between effect and mark, says "blocked <id>" for the parent to kill it, and
// sleeps; later callers sleep.
func (p *proc) enter(m dedup.Message) {
	p.mu.Lock()
	if p.frozen {
		p.mu.Unlock()
		time.Sleep(time.Hour) // SIGKILLed here
	}
	if p.killAt > 0 && p.total.Load() >= int64(p.killAt) {
		p.frozen = true
		for p.inGap > 0 {
			p.gapDone.Wait()
		}
		p.mu.Unlock()
		Say("blocked %s", m.ID)
		time.Sleep(time.Hour) // SIGKILLed here
	}
	p.inGap++
	p.mu.Unlock()
}

// leave is called once the Deduper has marked (or failed to mark) the id.
func (p *proc) leave() {
	p.mu.Lock()
	p.inGap--
	p.gapDone.Broadcast()
	p.mu.Unlock()
}

// effect is the business write: the ledger sum and the id's count, in one
// transaction. It is not started past the claim's deadline (another consumer
// may own the id by then), and once started it is detached from that
// deadline: a write that reached Redis must not be reported as failed, which
// would release the claim and let a redelivery repeat it.
func (p *proc) effect(ctx context.Context, m dedup.Message) error {
	amount, err := strconv.ParseInt(string(m.Body), 10, 64)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	var total *redis.IntCmd
	_, err = p.c.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		tx.HIncrBy(ctx, p.s.key("effects"), m.ID, 1)
		tx.IncrBy(ctx, p.s.key("ledger"), amount)
		tx.HIncrBy(ctx, p.s.key("stats"), "effects:"+p.name, 1)
		total = tx.HLen(ctx, p.s.key("effects"))
		return nil
	})
	if err == nil {
		p.total.Store(total.Val())
	}
	return err
}

// deleteKeys removes every key under prefix.
func deleteKeys(c *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			c.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Unlink(ctx, batch...)
	}
}

// Parallel runs n copies of run, the i-th with i, until they all return: it
// is how a target's Consume runs several consumers at once. It returns the
// first error other than a context error, or ctx.Err().
func Parallel(ctx context.Context, n int, run func(ctx context.Context, i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = run(ctx, i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return ctx.Err()
}
