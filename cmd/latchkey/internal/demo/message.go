package demo

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

func init() {
	register(&scenario{
		order:     2,
		name:      "failed-handler",
		title:     "A message handler fails after claiming the message; the broker redelivers it",
		menu:      "a message handler that fails after claiming the message",
		menuGuard: "dedup",
		guard:     "dedup: claim with a TTL, released when the handler fails, marked done when it succeeds",
		why: "marking a message consumed before it took effect loses it when the handler fails; " +
			"releasing the claim on failure lets the redelivery run, and the done mark stops the rest",
		unit: "messages lost or applied twice",
		tables: []string{
			// The naive consumer dedup, SET consumed:<id> NX, as a table.
			`CREATE TABLE IF NOT EXISTS demo_consumed (message_id {key} PRIMARY KEY)`,
			// What a message handler did: one row per effect.
			`CREATE TABLE IF NOT EXISTS demo_effects (message_id TEXT NOT NULL, consumer TEXT NOT NULL)`,
		},
		roles: []*role{consumerRole},
		play:  playMessage,
	})
}

// consumerRole is a message consumer.
var consumerRole = roleOf("consumer", consume)

func playMessage(ctx context.Context, d *demo, s *Result) error {
	// Two consumer processes serve both runs; each delivery says which
	// recipe to use.
	consumers, err := d.cast(ctx, part{name: "consumer 1", role: consumerRole}, part{name: "consumer 2", role: consumerRole})
	if err != nil {
		return err
	}
	defer consumers.kill()
	for _, guarded := range []bool{false, true} {
		tl := newTimeline()
		r, err := d.messageRun(ctx, guarded, consumers, tl)
		if err != nil {
			return fmt.Errorf("%s run: %w", runName(guarded), err)
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
	return nil
}

func (d *demo) messageRun(ctx context.Context, guarded bool, consumers group, tl *timeline) (*messageRun, error) {
	id := fmt.Sprintf("paid.R-1.%s.%s", d.runID, runName(guarded))
	r := &messageRun{}
	for n, dl := range messagePlan {
		n++
		p := consumers[dl.consumer]
		fail := 0
		if dl.fail {
			fail = 1
		}
		tl.add(time.Now(), "broker", kindSent, fmt.Sprintf("\"payment R-1 succeeded\" -> %s (%s)", p.name, dl.why), 0)
		mode := "naive"
		if guarded {
			mode = "dedup"
		}
		if err := p.Send(fmt.Sprintf("deliver %d %s %d %s", n, id, fail, mode)); err != nil {
			return nil, err
		}
		ev, err := p.Next(ctx, workerStartTimeout)
		if err != nil {
			return nil, err
		}
		out := messageDelivery{N: n, Consumer: p.name, Outcome: string(ev.Kind)}
		var what string
		k := ev.Kind
		switch ev.Kind {
		case kindProcessed:
			out.Acked, what = true, "claimed, credited the merchant, marked done: ack"
		case kindFailed:
			what = "claimed; handler failed (" + errMerchantDown.Error() + "): nack"
			if guarded {
				what = "claimed; handler failed: claim released, nack"
			}
		case kindDuplicate:
			out.Acked, what = true, "already done: ack without running the handler"
		case kindSkipped:
			out.Acked, what, k = true, "SET NX refused, \"already consumed\": ack, handler never ran", kindLost
		case kindBusy:
			what = string(ev.Kind)
		default:
			return nil, fmt.Errorf("%s: said %q, expected the delivery's outcome", p.name, ev.Kind)
		}
		tl.add(ev.time(), p.name, k, what, 0)
		r.Deliveries = append(r.Deliveries, out)
	}
	if err := d.data.row(ctx, `SELECT count(*) FROM demo_effects WHERE message_id = $1`, id).Scan(&r.Effects); err != nil {
		return nil, err
	}
	r.Lost, r.Twice = r.Effects == 0, r.Effects > 1
	r.Damaged = r.Effects != 1
	return r, nil
}

// consume is a message consumer. The demo, playing the broker, writes
// "deliver N ID FAIL MODE" lines; the consumer answers each with its
// outcome: processed or duplicate or skipped (it acks), failed (it nacks).
// MODE "naive" is SET NX before the handler; "dedup" is
// dedup.Deduper on the shared store.
func consume(ctx context.Context, w *worker, _ struct{}) error {
	st, err := w.stores(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = st.close() }()
	dd, err := dedup.New(st.dedup, dedup.WithProcessingTTL(30*time.Second))
	if err != nil {
		return err
	}
	w.ready(event{})
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
			_, err := w.data.exec(ctx, `INSERT INTO demo_effects (message_id, consumer) VALUES ($1, $2)`, m.ID, w.name)
			return err
		}
		var outcome kind
		if f[4] == "dedup" {
			o, err := dd.Process(ctx, dedup.Message{ID: id}, handle)
			switch o {
			case dedup.OutcomeProcessed:
				outcome = kindProcessed
			case dedup.OutcomeDuplicate:
				outcome = kindDuplicate
			case dedup.OutcomeFailed:
				outcome = kindFailed
			case dedup.OutcomeBusy:
				outcome = kindBusy
			default:
				return fmt.Errorf("delivery %d: %w", n, err)
			}
		} else {
			first, err := st.naive.claim(ctx, id)
			switch {
			case err != nil:
				return err
			case !first:
				outcome = kindSkipped
			case handle(ctx, dedup.Message{ID: id}) != nil:
				outcome = kindFailed
			default:
				outcome = kindProcessed
			}
		}
		w.emit(event{Kind: outcome, Round: n, ID: id})
	}
}
