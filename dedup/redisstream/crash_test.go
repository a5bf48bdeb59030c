package redisstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisdedup"
	"github.com/latchkey-go/latchkey/dedup/redisstream"
)

// childEnv, when set, turns the test binary into the child consumer of
// TestCrashExactlyOnce; its value is a JSON crashSpec.
const childEnv = "LATCHKEY_REDISSTREAM_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		runChild(spec)
		os.Exit(3) // runChild blocks until killed
	}
	os.Exit(m.Run())
}

// crashSpec is what parent and child share.
type crashSpec struct {
	Addr, Prefix string
	Seed         uint64
	BlockAfter   int // the child blocks in the handler after this many effects
}

const (
	crashGroup   = "billing"
	crashTTL     = 2 * time.Second // dedup processing TTL
	crashMinIdle = 300 * time.Millisecond
	failRate     = 0.10
)

func (s crashSpec) stream() string { return s.Prefix + "stream" }

// consumer builds one consumer of the test's group: a Deduper on redisdedup
// around the effect, with failures injected before the effect at failRate.
// beforeEffect runs after the failure draw, before the effect.
func (s crashSpec) consumer(c *redis.Client, name string, seed uint64, outcomes *[6]atomic.Int64,
	beforeEffect func(m dedup.Message), onError func(context.Context, error)) (*redisstream.Consumer, error) {
	d, err := dedup.New(redisdedup.New(c, redisdedup.WithPrefix(s.Prefix+"dedup:")), dedup.WithProcessingTTL(crashTTL))
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 7)) // only Run's goroutine calls the handler
	effect := func(ctx context.Context, m dedup.Message) error {
		if rng.Float64() < failRate {
			c.Incr(ctx, s.Prefix+"failures:"+name)
			return errors.New("injected failure")
		}
		if beforeEffect != nil {
			beforeEffect(m)
		}
		amount, err := strconv.ParseInt(string(m.Body), 10, 64)
		if err != nil {
			return err
		}
		_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.IncrBy(ctx, s.Prefix+"ledger", amount)
			p.RPush(ctx, s.Prefix+"effects", m.ID)
			p.Incr(ctx, s.Prefix+"effects:"+name)
			return nil
		})
		return err
	}
	h := func(ctx context.Context, m dedup.Message) error {
		o, err := d.Process(ctx, m, effect)
		outcomes[o].Add(1)
		return err
	}
	return redisstream.NewConsumer(c, s.stream(), crashGroup, name, h,
		redisstream.WithBatchSize(20), redisstream.WithBlock(50*time.Millisecond),
		redisstream.WithMinIdle(crashMinIdle), redisstream.WithReclaimInterval(50*time.Millisecond),
		redisstream.WithErrorHandler(onError))
}

// runChild consumes as "child" until, after BlockAfter effects, it marks the
// message in hand in Redis and blocks inside the handler, before the effect,
// holding the claim and its batch's pending entries, until the parent kills
// it.
func runChild(raw string) {
	var s crashSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	var outcomes [6]atomic.Int64
	effects := 0
	block := func(m dedup.Message) {
		if effects++; effects > s.BlockAfter {
			c.Set(context.Background(), s.Prefix+"child-blocked", m.ID, 0)
			time.Sleep(time.Hour) // SIGKILLed here
		}
	}
	cons, err := s.consumer(c, "child", s.Seed, &outcomes, block, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	_ = cons.Run(context.Background())
}

// TestCrashExactlyOnce: 2,000 payments, each published once or twice (a
// duplicate is a new entry with the same business id), consumed by two
// consumers of one group, the test process and a child process; handlers fail
// at random (~10%) and the child is SIGKILLed inside a handler. At the end
// every id took effect exactly once and the ledger holds the expected sum.
//
// The effect (INCRBY ledger + RPUSH effects, in one MULTI) and the dedup mark
// (redisdedup) are separate writes, so a consumer killed between them would,
// once its claim expired, have the effect run again: that gap is inherent to
// a non-transactional dedup store (use sqlinbox to close it). This test
// therefore kills the child only before the effect: it blocks inside the
// handler, claim held, and is killed there. Injected failures also happen
// before the effect.
func TestCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	const n = 2000
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c, prefix := newClient(t)
	seed := uint64(time.Now().UnixNano())
	spec := crashSpec{Addr: c.Options().Addr, Prefix: prefix, Seed: seed + 1, BlockAfter: 150}
	t.Logf("seed %d", seed)

	// Publish: ids shuffled with their duplicates, so copies of one id are
	// sometimes adjacent (same batch) and sometimes far apart.
	rng := rand.New(rand.NewPCG(seed, 1))
	var entries []int
	var want int64
	for i := range n {
		entries = append(entries, i)
		if rng.IntN(2) == 0 {
			entries = append(entries, i)
		}
		want += int64(i + 1)
	}
	rng.Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
	var last string
	for _, i := range entries {
		id, err := redisstream.Publish(ctx, c, spec.stream(), dedup.Message{ID: fmt.Sprintf("pay-%04d", i), Body: []byte(strconv.Itoa(i + 1))})
		if err != nil {
			t.Fatal(err)
		}
		last = id
	}
	dups := len(entries) - n

	// The child consumer.
	raw, _ := json.Marshal(spec)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+string(raw))
	var childOut bytes.Buffer
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	childWait := sync.OnceValue(child.Wait)
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = childWait()
	})

	// Start the parent once the child is under way, so both consume.
	for c.Get(ctx, prefix+"effects:child").Val() == "" {
		if ctx.Err() != nil {
			t.Fatalf("child never took effect; output:\n%s", childOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	var outcomes [6]atomic.Int64
	log := &errLog{}
	cons, err := spec.consumer(c, "parent", seed+2, &outcomes, nil, log.add)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- cons.Run(runCtx) }()
	runWait := sync.OnceValue(func() error { return <-runDone })
	defer func() { stop(); _ = runWait() }()

	// Kill the child when it blocks inside its handler.
	var blocked string
	for blocked == "" {
		blocked = c.Get(ctx, prefix+"child-blocked").Val()
		if ctx.Err() != nil {
			t.Fatalf("child never blocked; output:\n%s", childOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = childWait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
		t.Fatalf("child: %v, want killed by a signal; output:\n%s", err, childOut.String())
	}
	t.Logf("child SIGKILLed inside the handler of %s", blocked)

	// Wait until every entry was delivered and none is pending.
	for {
		if ctx.Err() != nil {
			t.Fatalf("not drained: %d effects of %d, pending %d", c.LLen(context.Background(), prefix+"effects").Val(), n, pending(t, c, spec.stream(), crashGroup))
		}
		groups, err := c.XInfoGroups(ctx, spec.stream()).Result()
		if err == nil && len(groups) == 1 && groups[0].LastDeliveredID == last && groups[0].Pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := runWait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}

	effects, err := c.LRange(context.Background(), prefix+"effects", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]int, n)
	for _, id := range effects {
		seen[id]++
	}
	for i := range n {
		if id := fmt.Sprintf("pay-%04d", i); seen[id] != 1 {
			t.Errorf("%s took effect %d times", id, seen[id])
		}
	}
	if len(effects) != n {
		t.Errorf("%d effects, want %d", len(effects), n)
	}
	if got, _ := c.Get(context.Background(), prefix+"ledger").Int64(); got != want {
		t.Errorf("ledger %d, want %d", got, want)
	}
	num := func(k string) string { return c.Get(context.Background(), prefix+k).Val() }
	t.Logf("%d ids, %d entries (%d duplicates); effects: child %s, parent %s; injected failures: child %s, parent %s",
		n, len(entries), dups, num("effects:child"), num("effects:parent"), num("failures:child"), num("failures:parent"))
	t.Logf("parent outcomes: processed %d, duplicate %d, busy %d, failed %d, rejected %d; not recorded %d; other errors %d",
		outcomes[dedup.Processed].Load(), outcomes[dedup.Duplicate].Load(), outcomes[dedup.Busy].Load(),
		outcomes[dedup.Failed].Load(), outcomes[dedup.Rejected].Load(), log.count(dedup.ErrNotRecorded),
		len(log.errs)-log.count(dedup.ErrInProgress)-int(outcomes[dedup.Failed].Load())-log.count(dedup.ErrNotRecorded))
	if outcomes[dedup.Rejected].Load() != 0 {
		t.Errorf("rejected messages: %v", log.errs)
	}
}
