package natsconsumer_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/natsconsumer"
	"github.com/latchkey-go/latchkey/internal/dedupdrill"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

func TestMain(m *testing.M) { dedupdrill.Main(m, drillTarget.Role()) }

// drillConfig names the drill's stream and durable consumer.
type drillConfig struct {
	URL, Stream string
}

const (
	drillDurable   = "billing"
	drillIDHeader  = "Payment-Id"
	drillConsumers = 4 // per process
)

// drillJS connects to the drill's server; the caller closes the connection.
func drillJS(raw string) (drillConfig, *nats.Conn, jetstream.JetStream, error) {
	cfg, err := dedupdrill.Config[drillConfig](raw)
	if err != nil {
		return cfg, nil, nil, err
	}
	nc, err := nats.Connect(cfg.URL)
	if err != nil {
		return cfg, nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return cfg, nil, nil, err
	}
	return cfg, nc, js, nil
}

// sameMsgID reports whether an id's second copy is republished under the
// first's Nats-Msg-Id (a third of them), which the stream's duplicate window
// drops, rather than under a new one, which only the Deduper stops.
func sameMsgID(id string) bool {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()%3 == 0
}

// drillTarget is one durable pull consumer shared by four natsconsumer
// Consumers in each process. A second copy is either a republish under the
// same Nats-Msg-Id, which the stream drops within its duplicate window, or a
// copy under another Nats-Msg-Id with the same Payment-Id header (a producer
// that changed message ids, or a republish after the window): the stream
// stores it and only the Deduper, keyed on Payment-Id, stops it. The killed
// child's fetched messages come back after AckWait.
var drillTarget = dedupdrill.Target{
	Name: "natsconsumer",
	Publish: func(ctx context.Context, raw string, msgs []dedup.Message) error {
		cfg, nc, js, err := drillJS(raw)
		if err != nil {
			return err
		}
		defer nc.Close()
		// Publish from 16 goroutines, each waiting for its PubAck; a pair
		// under one Nats-Msg-Id must then have exactly one copy dropped.
		dups := make(map[string]*atomic.Int32)
		for _, m := range msgs {
			if sameMsgID(m.ID) && dups[m.ID] == nil {
				dups[m.ID] = new(atomic.Int32)
			}
		}
		ch := make(chan dedup.Message)
		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for m := range ch {
					var ack *jetstream.PubAck
					var err error
					if m.Header[dedupdrill.HeaderCopy] == "2" && !sameMsgID(m.ID) {
						msg := nats.NewMsg(cfg.Stream)
						msg.Data = m.Body
						msg.Header.Set(jetstream.MsgIDHeader, m.ID+"-republished")
						msg.Header.Set(drillIDHeader, m.ID)
						ack, err = js.PublishMsg(ctx, msg)
					} else {
						ack, err = natsconsumer.Publish(ctx, js, cfg.Stream, m, natsconsumer.WithIDHeader(drillIDHeader))
					}
					if err == nil && ack.Duplicate && dups[m.ID] != nil {
						dups[m.ID].Add(1)
					} else if err == nil && ack.Duplicate {
						err = fmt.Errorf("%s: dropped as a duplicate, but its copies have distinct Nats-Msg-Ids", m.ID)
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
		for _, m := range msgs {
			ch <- m
		}
		close(ch)
		wg.Wait()
		copies := map[string]int{}
		for _, m := range msgs {
			copies[m.ID]++
		}
		for id, n := range dups {
			if want := int32(copies[id] - 1); n.Load() != want {
				errs = append(errs, fmt.Errorf("%s: %d of %d copies under one Nats-Msg-Id dropped, want %d", id, n.Load(), copies[id], want))
			}
		}
		return errors.Join(errs...)
	},
	Consume: func(ctx context.Context, raw, proc string, h dedup.Handler) error {
		cfg, nc, js, err := drillJS(raw)
		if err != nil {
			return err
		}
		defer nc.Close()
		jc, err := js.Consumer(ctx, cfg.Stream, drillDurable)
		if err != nil {
			return err
		}
		err = dedupdrill.Parallel(ctx, drillConsumers, func(ctx context.Context, _ int) error {
			c, err := natsconsumer.New(jc, h, natsconsumer.WithIDHeader(drillIDHeader), natsconsumer.WithBatchSize(10),
				natsconsumer.WithMaxWait(100*time.Millisecond), natsconsumer.WithNakDelay(20*time.Millisecond),
				natsconsumer.WithMaxBusyDelay(200*time.Millisecond))
			if err != nil {
				return err
			}
			return c.Run(ctx)
		})
		_ = nc.Flush() // acks are sent without waiting for the server
		return err
	},
	Drained: func(ctx context.Context, raw string) (bool, error) {
		cfg, nc, js, err := drillJS(raw)
		if err != nil {
			return false, err
		}
		defer nc.Close()
		jc, err := js.Consumer(ctx, cfg.Stream, drillDurable)
		if err != nil {
			return false, err
		}
		info, err := jc.Info(ctx)
		if err != nil {
			return false, err
		}
		return info.NumPending == 0 && info.NumAckPending == 0, nil
	},
}

// TestExactlyOnce: 10,000 payments, each published once or twice, consumed
// through one durable pull consumer by two processes, four Consumers each;
// handlers fail at random (~10%) and the child process is SIGKILLed inside
// its handlers, so neither its acks, its naks nor its effects reach anyone;
// its unacknowledged messages come back after AckWait, and its claims expire
// after the processing TTL. At the end every id took effect exactly once, the
// ledger holds the expected sum and nothing awaits delivery or an ack (see
// dedupdrill).
func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	js := connect(t)
	stream := newStream(t, js)
	newJSConsumer(t, js, stream, 2*time.Second)
	dedupdrill.Run(t, drillTarget, drillConfig{URL: testsvc.NATSURL(t), Stream: stream}, dedupdrill.Options{TTL: time.Second})
}
