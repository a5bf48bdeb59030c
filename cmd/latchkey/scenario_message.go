package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
)

// The usual hand-written consumer dedup: "SET consumed:<id> NX, then
// handle". A handler that fails after the SET loses the message: the broker
// redelivers it, and every redelivery finds the mark and is skipped. The demo plays an
// at-least-once broker for two consumer processes: the first delivery fails
// (the merchant's service times out), the broker redelivers it to the other
// consumer, and once more after that consumer's ack was lost.
type messageDelivery struct {
	N        int    `json:"delivery"`
	Consumer string `json:"consumer"`
	Outcome  string `json:"outcome"` // processed, failed, duplicate, skipped
	Acked    bool   `json:"acked"`
}

type messageRun struct {
	Deliveries []messageDelivery `json:"deliveries"`
	Effects    int               `json:"effects"` // times the message took effect; 1 is right
	Lost       bool              `json:"lost"`
	Twice      bool              `json:"processed_twice"`
	Damaged    bool              `json:"damaged"`
}

// The broker's deliveries: to which consumer, and whether its handler fails.
var messagePlan = []struct {
	consumer int
	fail     bool
	why      string
}{
	{0, true, "first delivery"},
	{1, false, "redelivered after the nack"},
	{0, false, "redelivered: the ack was lost"},
}

var errMerchantDown = errors.New("merchant service timed out")

func (d *demo) message(ctx context.Context) *scenario {
	s := &scenario{
		Name:  "failed-handler",
		Title: "A message handler fails after claiming the message; the broker redelivers it",
		Guard: "dedup: claim with a TTL, released when the handler fails, marked done when it succeeds",
		Why: "marking a message consumed before it took effect loses it when the handler fails; " +
			"releasing the claim on failure lets the redelivery run, and the done mark stops the rest",
		Damage: damage{Unit: "messages lost or applied twice"},
		OK:     true,
	}
	// Two consumer processes serve both runs; each delivery says which
	// recipe to use.
	var consumers []*proc
	defer func() {
		for _, p := range consumers {
			p.Kill()
		}
	}()
	for i := 1; i <= 2; i++ {
		p, err := d.start(ctx, fmt.Sprintf("consumer %d", i), "", "-role", "consumer")
		if err != nil {
			return s.failed(err)
		}
		consumers = append(consumers, p)
	}
	if _, err := wantReady(ctx, consumers...); err != nil {
		return s.failed(err)
	}
	for _, guarded := range []bool{false, true} {
		tl := newTimeline()
		r, err := d.messageRun(ctx, guarded, consumers, tl)
		if err != nil {
			return s.failed(fmt.Errorf("%s run: %w", runName(guarded), err))
		}
		harm := max(r.Effects-1, 1-r.Effects)
		outcomes := make([]string, len(r.Deliveries))
		for i, dl := range r.Deliveries {
			outcomes[i] = dl.Outcome
		}
		if guarded {
			s.Guarded, s.Timeline.Guarded, s.Damage.Guarded = r, tl.sorted(), harm
			s.OK = !r.Damaged
			s.say("guarded:   3 deliveries (%s): took effect %s %s", strings.Join(outcomes, ", "),
				plural(r.Effects, "time", "times"), mark(s.OK))
			continue
		}
		s.Unguarded, s.Timeline.Unguarded, s.Damage.Unguarded = r, tl.sorted(), harm
		fate := fmt.Sprintf("took effect %s", plural(r.Effects, "time", "times"))
		if r.Lost {
			fate = "the message is lost"
		}
		s.say("unguarded: 3 deliveries (%s): %s %s", strings.Join(outcomes, ", "), fate, expected(r.Damaged))
	}
	return s
}

func (d *demo) messageRun(ctx context.Context, guarded bool, consumers []*proc, tl *timeline) (*messageRun, error) {
	id := fmt.Sprintf("paid.R-1.%s.%s", d.runID, runName(guarded))
	r := &messageRun{}
	for n, dl := range messagePlan {
		n++
		p := consumers[dl.consumer]
		fail := 0
		if dl.fail {
			fail = 1
		}
		tl.add(time.Now(), "broker", "sent", fmt.Sprintf("\"payment R-1 succeeded\" -> %s (%s)", p.name, dl.why), 0)
		mode := "naive"
		if guarded {
			mode = "dedup"
		}
		if err := p.Send(fmt.Sprintf("deliver %d %s %d %s", n, id, fail, mode)); err != nil {
			return nil, err
		}
		ev, err := p.Expect(ctx, "outcome", workerStartTimeout)
		if err != nil {
			return nil, err
		}
		out := messageDelivery{N: n, Consumer: p.name, Outcome: ev.Msg}
		var what string
		switch ev.Msg {
		case "processed":
			out.Acked, what = true, "claimed, credited the merchant, marked done: ack"
		case "failed":
			what = "claimed; handler failed (" + errMerchantDown.Error() + "): nack"
			if guarded {
				what = "claimed; handler failed: claim released, nack"
			}
		case "duplicate":
			out.Acked, what = true, "already done: ack without running the handler"
		case "skipped":
			out.Acked, what = true, "SET NX refused, \"already consumed\": ack, handler never ran"
		default:
			what = ev.Msg
		}
		kind := ev.Msg
		if ev.Msg == "skipped" {
			kind = "lost"
		}
		tl.addUnix(ev.At, p.name, kind, what, 0)
		r.Deliveries = append(r.Deliveries, out)
	}
	if err := d.data.row(ctx, `SELECT count(*) FROM demo_effects WHERE message_id = $1`, id).Scan(&r.Effects); err != nil {
		return nil, err
	}
	r.Lost, r.Twice = r.Effects == 0, r.Effects > 1
	r.Damaged = r.Effects != 1
	return r, nil
}

// consumerRole is a message consumer. The demo, playing the broker, writes
// "deliver N ID FAIL MODE" lines; the consumer answers each with an "outcome"
// event: processed or duplicate or skipped (it acks), failed (it nacks).
// MODE "naive" is SET NX before the handler; "dedup" is
// dedup.Deduper on the shared store.
func consumerRole(ctx context.Context, w *workerEnv, ready func(event)) error {
	st, err := openStores(ctx, w.c.store, w.data)
	if err != nil {
		return err
	}
	defer st.close()
	dd, err := dedup.New(st.dedup, dedup.WithProcessingTTL(30*time.Second))
	if err != nil {
		return err
	}
	ready(event{})
	for {
		f, err := w.order(ctx, "deliver", 5)
		if f == nil {
			return err
		}
		n, _ := strconv.Atoi(f[1])
		id, fail := f[2], f[3] == "1"
		handle := func(ctx context.Context, m dedup.Message) error {
			if fail {
				return errMerchantDown
			}
			_, err := w.data.exec(ctx, `INSERT INTO demo_effects (message_id, consumer) VALUES ($1, $2)`, m.ID, w.c.name)
			return err
		}
		var outcome string
		if f[4] == "dedup" {
			o, err := dd.Process(ctx, dedup.Message{ID: id}, handle)
			switch o {
			case dedup.Processed:
				outcome = "processed"
			case dedup.Duplicate:
				outcome = "duplicate"
			case dedup.Failed:
				outcome = "failed"
			case dedup.Busy:
				outcome = "busy"
			default:
				return fmt.Errorf("delivery %d: %w", n, err)
			}
		} else {
			first, err := st.naive.claim(ctx, id)
			switch {
			case err != nil:
				return err
			case !first:
				outcome = "skipped"
			case handle(ctx, dedup.Message{ID: id}) != nil:
				outcome = "failed"
			default:
				outcome = "processed"
			}
		}
		w.emit(event{Ev: "outcome", Round: n, ID: id, Msg: outcome})
	}
}
