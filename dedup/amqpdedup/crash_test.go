package amqpdedup_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/amqpdedup"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// ledger records effects; it stands in for the business database.
type ledger struct {
	mu    sync.Mutex
	sum   int64
	times map[string]int
}

func (l *ledger) apply(m dedup.Message) error {
	amount, err := strconv.ParseInt(string(m.Body), 10, 64)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sum += amount
	l.times[m.ID]++
	return nil
}

func (l *ledger) effects() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.times)
}

// TestCrashExactlyOnce: 1,000 payments, each published once or twice (a
// duplicate is a second message with the same message-id), consumed from one
// queue by two consumers on their own connections; handlers fail at random
// (~10%), and consumer B closes its channel inside a handler, claim held,
// and never finishes that message: the broker redelivers B's unacked
// deliveries to A with the redelivered flag. At the end every id took effect
// exactly once, the ledger holds the expected sum, every copy was acked and
// the queue is empty.
//
// As in redisstream's crash test, the crash and the injected failures come
// before the effect: with a store separate from the business write, a crash
// between effect and Done would let the redelivery run the effect again
// (sqlinbox closes that gap).
func TestCrashExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test")
	}
	const (
		n          = 1000
		failRate   = 0.10
		ttl        = time.Second
		crashAfter = 100 // B crashes inside its handler after this many effects
	)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	connA, connB, connP := dial(t), dial(t), dial(t)
	queue, pub := newQueue(t, connP)

	rng := rand.New(rand.NewPCG(seed, 1))
	var copies []int
	var want int64
	for i := range n {
		copies = append(copies, i)
		if rng.IntN(2) == 0 {
			copies = append(copies, i)
		}
		want += int64(i + 1)
	}
	rng.Shuffle(len(copies), func(i, j int) { copies[i], copies[j] = copies[j], copies[i] })
	for _, i := range copies {
		m := dedup.Message{ID: fmt.Sprintf("pay-%04d", i), Body: []byte(strconv.Itoa(i + 1))}
		if err := amqpdedup.Publish(ctx, pub, "", queue, m); err != nil {
			t.Fatal(err)
		}
	}

	d, err := dedup.New(dedup.FromIdem(memstore.New()), dedup.WithProcessingTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	led := &ledger{times: make(map[string]int, n)}
	var acks atomic.Int64 // copies whose handler said ack
	var outcomes [6]atomic.Int64

	// handler builds one consumer's handler; crash, if set, runs before
	// the effect and reports whether to crash there.
	handler := func(seed uint64, crash func(m dedup.Message) bool, redelivered *sync.Map) dedup.Handler {
		rng := rand.New(rand.NewPCG(seed, 2)) // only Run's goroutine calls it
		effect := func(ctx context.Context, m dedup.Message) error {
			if rng.Float64() < failRate {
				return errors.New("injected failure")
			}
			if crash != nil && crash(m) {
				<-ctx.Done() // "dead": hold the claim until the TTL
				return ctx.Err()
			}
			return led.apply(m)
		}
		return func(ctx context.Context, m dedup.Message) error {
			if redelivered != nil && m.Header[amqpdedup.HeaderRedelivered] == "true" {
				redelivered.Store(m.ID, true)
			}
			o, err := d.Process(ctx, m, effect)
			outcomes[o].Add(1)
			if dedup.ShouldAck(err) {
				acks.Add(1)
			}
			return err
		}
	}
	opts := func(log *errLog) []amqpdedup.Option {
		return []amqpdedup.Option{
			amqpdedup.WithPrefetch(20),
			amqpdedup.WithFailureDelay(2 * time.Millisecond),
			amqpdedup.WithMaxRequeueDelay(50 * time.Millisecond),
			amqpdedup.WithErrorHandler(log.add),
		}
	}

	// Consumer B: closes its channel inside the handler of one message.
	chB := channel(t, connB)
	var crashed atomic.Value // the id B died holding
	effectsB := 0
	crashB := func(m dedup.Message) bool {
		if effectsB++; effectsB <= crashAfter || crashed.Load() != nil {
			return false
		}
		crashed.Store(m.ID)
		_ = chB.Close()
		effectsB-- // not an effect
		return true
	}
	logB := &errLog{}
	consB, err := amqpdedup.NewConsumer(chB, queue, handler(seed+2, crashB, nil), opts(logB)...)
	if err != nil {
		t.Fatal(err)
	}
	doneB := make(chan error, 1)
	go func() { doneB <- consB.Run(ctx) }()

	// Consumer A: runs until the test stops it.
	chA := channel(t, connA)
	var redeliveredA sync.Map
	logA := &errLog{}
	consA, err := amqpdedup.NewConsumer(chA, queue, handler(seed+3, nil, &redeliveredA), opts(logA)...)
	if err != nil {
		t.Fatal(err)
	}
	runA, stopA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() { doneA <- consA.Run(runA) }()
	waitA := sync.OnceValue(func() error { return <-doneA })
	defer func() { stopA(); _ = waitA() }()

	select {
	case err := <-doneB:
		if !errors.Is(err, amqpdedup.ErrClosed) {
			t.Fatalf("B's Run: %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("B never crashed")
	}
	blocked, _ := crashed.Load().(string)
	t.Logf("B closed its channel inside the handler of %s", blocked)

	// Every copy is acked exactly once, so this is the drain condition.
	for acks.Load() < int64(len(copies)) {
		if ctx.Err() != nil {
			t.Fatalf("not drained: %d acks of %d copies, %d ids took effect of %d", acks.Load(), len(copies), led.effects(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopA()
	if err := waitA(); !errors.Is(err, context.Canceled) {
		t.Errorf("A's Run: %v, want context.Canceled", err)
	}
	if r := ready(t, chA, queue); r != 0 {
		t.Errorf("%d messages left in the queue", r)
	}
	if _, ok := redeliveredA.Load(blocked); !ok {
		t.Errorf("A never saw %s, which B died holding, as redelivered", blocked)
	}
	for i := range n {
		if id := fmt.Sprintf("pay-%04d", i); led.times[id] != 1 {
			t.Errorf("%s took effect %d times", id, led.times[id])
		}
	}
	if led.sum != want {
		t.Errorf("ledger %d, want %d", led.sum, want)
	}
	nRedelivered := 0
	redeliveredA.Range(func(any, any) bool { nRedelivered++; return true })
	t.Logf("%d ids, %d copies (%d duplicates); ids A saw redelivered: %d", n, len(copies), len(copies)-n, nRedelivered)
	t.Logf("outcomes: processed %d, duplicate %d, busy %d, failed %d, rejected %d; B reported %d errors (%d from its closed channel)",
		outcomes[dedup.Processed].Load(), outcomes[dedup.Duplicate].Load(), outcomes[dedup.Busy].Load(),
		outcomes[dedup.Failed].Load(), outcomes[dedup.Rejected].Load(), len(logB.errs), logB.count(amqp.ErrClosed))
	if outcomes[dedup.Rejected].Load() != 0 {
		t.Errorf("rejected deliveries: A %v, B %v", logA.errs, logB.errs)
	}
}
