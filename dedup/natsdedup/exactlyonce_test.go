package natsdedup_test

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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/natsdedup"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// ledger records effects; it is the test's business write.
type ledger struct {
	mu    sync.Mutex
	count map[string]int
	sum   int64
	n     int
}

func (l *ledger) apply(id string, amount int64) {
	l.mu.Lock()
	l.count[id]++
	l.sum += amount
	l.n++
	l.mu.Unlock()
}

func (l *ledger) effects() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// TestExactlyOnce: 1,000 payments, each published once or twice, consumed by
// two Consumers (each on its own connection) sharing one durable pull
// consumer; handlers fail at random (~10%) and one consumer "crashes" inside
// a handler: its connection is closed while it holds the claim, so neither
// an ack, a nak nor the effect reaches anyone, and its unacknowledged batch
// comes back after AckWait. At the end every id took effect exactly once and
// the ledger holds the expected sum.
//
// A second copy is either a republish under the same Nats-Msg-Id, which the
// stream drops within its duplicate window, or a copy under another
// Nats-Msg-Id with the same Payment-Id header (a producer that changed
// message ids, or a republish after the window): the stream stores it and
// only the Deduper, keyed on Payment-Id, stops it. As in the redisstream
// crash test, the crash happens before the effect: the effect and the dedup
// mark are separate writes.
func TestExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	const (
		n        = 1000
		idHeader = "Payment-Id"
		ttl      = 2 * time.Second // dedup processing TTL
		ackWait  = 3 * time.Second
		failRate = 0.10
	)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	js := connect(t)
	stream := newStream(t, js)
	jcA := newJSConsumer(t, js, stream, ackWait)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	// Publish, in shuffled order so copies of one id are sometimes in one
	// batch and sometimes far apart.
	type entry struct{ i, kind int } // kind 0: first copy; 1: same Nats-Msg-Id; 2: new Nats-Msg-Id
	rng := rand.New(rand.NewPCG(seed, 1))
	var entries []entry
	var want int64
	for i := range n {
		entries = append(entries, entry{i, 0})
		if k := rng.IntN(3); k > 0 {
			entries = append(entries, entry{i, k})
		}
		want += int64(i + 1)
	}
	rng.Shuffle(len(entries), func(a, b int) { entries[a], entries[b] = entries[b], entries[a] })
	first := make(map[int]bool, n)
	var dropped, stored int
	for _, e := range entries {
		id := fmt.Sprintf("pay-%04d", e.i)
		body := []byte(strconv.Itoa(e.i + 1))
		var ack *jetstream.PubAck
		var err error
		if e.kind == 2 {
			m := nats.NewMsg(stream)
			m.Data = body
			m.Header.Set(jetstream.MsgIDHeader, id+"-republished")
			m.Header.Set(idHeader, id)
			ack, err = js.PublishMsg(ctx, m)
		} else {
			ack, err = natsdedup.Publish(ctx, js, stream, dedup.Message{ID: id, Body: body}, natsdedup.WithIDHeader(idHeader))
		}
		if err != nil {
			t.Fatal(err)
		}
		// The same Nats-Msg-Id is dropped only if its first copy came first.
		if wantDup := e.kind == 1 && first[e.i] || e.kind == 0 && first[e.i]; ack.Duplicate != wantDup {
			t.Fatalf("%s kind %d: PubAck.Duplicate %v, want %v", id, e.kind, ack.Duplicate, wantDup)
		}
		if e.kind != 2 {
			first[e.i] = true
		}
		if ack.Duplicate {
			dropped++
		} else {
			stored++
		}
	}

	d, err := dedup.New(dedup.FromIdem(memstore.New()), dedup.WithProcessingTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	led := &ledger{count: make(map[string]int, n)}
	var outcomes [6]atomic.Int64
	var failures atomic.Int64
	blocked := make(chan string, 1)

	// consumer builds one Consumer; crashAt > 0 makes its handler block,
	// claim held, before its crashAt-th effect.
	consumer := func(jc jetstream.Consumer, seed uint64, crashAt int, log *errLog) *natsdedup.Consumer {
		rng := rand.New(rand.NewPCG(seed, 7)) // only Run's goroutine calls the handler
		attempts := 0
		effect := func(ctx context.Context, m dedup.Message) error {
			if rng.Float64() < failRate {
				failures.Add(1)
				return errors.New("injected failure")
			}
			if attempts++; crashAt > 0 && attempts == crashAt {
				blocked <- m.ID
				<-ctx.Done() // the claim's TTL: the "dead" consumer never writes
				return ctx.Err()
			}
			amount, err := strconv.ParseInt(string(m.Body), 10, 64)
			if err != nil {
				return err
			}
			led.apply(m.ID, amount)
			return nil
		}
		h := func(ctx context.Context, m dedup.Message) error {
			o, err := d.Process(ctx, m, effect)
			outcomes[o].Add(1)
			return err
		}
		c, err := natsdedup.NewConsumer(jc, h, natsdedup.WithIDHeader(idHeader), natsdedup.WithBatchSize(20),
			natsdedup.WithMaxWait(100*time.Millisecond), natsdedup.WithNakDelay(20*time.Millisecond),
			natsdedup.WithMaxBusyDelay(100*time.Millisecond), natsdedup.WithErrorHandler(log.add))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// B has a connection of its own, which the crash closes.
	ncB, err := nats.Connect(testsvc.NATSURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ncB.Close()
	jsB, err := jetstream.New(ncB)
	if err != nil {
		t.Fatal(err)
	}
	jcB, err := jsB.Consumer(ctx, stream, "billing")
	if err != nil {
		t.Fatal(err)
	}
	logA, logB := &errLog{}, &errLog{}
	consA := consumer(jcA, seed+2, 0, logA)
	consB := consumer(jcB, seed+3, 150, logB)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	runErrs := make([]error, 2)
	for i, c := range []*natsdedup.Consumer{consA, consB} {
		wg.Go(func() { runErrs[i] = c.Run(runCtx) })
	}
	defer wg.Wait()

	select {
	case id := <-blocked:
		ncB.Close()
		t.Logf("consumer B's connection closed inside the handler of %s", id)
	case <-ctx.Done():
		t.Fatal("consumer B never reached its crash point")
	}

	for led.effects() < n || !settled(t, jcA) {
		if ctx.Err() != nil {
			t.Fatalf("not drained: %d effects of %d", led.effects(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	for i, err := range runErrs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run %d: %v, want context.Canceled", i, err)
		}
	}

	led.mu.Lock()
	defer led.mu.Unlock()
	for i := range n {
		if id := fmt.Sprintf("pay-%04d", i); led.count[id] != 1 {
			t.Errorf("%s took effect %d times", id, led.count[id])
		}
	}
	if led.n != n || led.sum != want {
		t.Errorf("%d effects, ledger %d; want %d, %d", led.n, led.sum, n, want)
	}
	if r := outcomes[dedup.Rejected].Load(); r != 0 {
		t.Errorf("%d rejected; A reported %v", r, logA.errs)
	}
	t.Logf("%d ids, %d publishes: %d stored, %d dropped by the stream's duplicate window; %d injected failures",
		n, len(entries), stored, dropped, failures.Load())
	t.Logf("outcomes: processed %d, duplicate %d, busy %d, failed %d, rejected %d",
		outcomes[dedup.Processed].Load(), outcomes[dedup.Duplicate].Load(), outcomes[dedup.Busy].Load(),
		outcomes[dedup.Failed].Load(), outcomes[dedup.Rejected].Load())
}
