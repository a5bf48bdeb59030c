package demo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/state"
)

// The lost update: A sends B 100 while C sends B 200, each by reading
// B's balance, adding, and writing it back. Two processes (two instances of
// the service) do one transfer each, at the same moment. Idempotency cannot
// help: these are two different operations. A lock makes them take turns;
// a version column makes the second notice and redo its read.
const (
	transferStart = 1000
	// transferHold is the work between read and write (a risk check, a slow
	// query): the window in which the other transfer reads the same balance.
	transferHold = 150 * time.Millisecond
	transferTTL  = 10 * time.Second
)

var transferAmounts = []int64{100, 200}

type transferRun struct {
	Guard         string   `json:"guard"` // none, lock, version
	Start         int64    `json:"start"`
	Transfers     []int64  `json:"transfers"`
	Expected      int64    `json:"expected"`
	Final         int64    `json:"final"`
	LostMoney     int64    `json:"lost_money"`
	LostTransfers int      `json:"lost_transfers"`
	Conflicts     int      `json:"version_conflicts,omitempty"`
	Tokens        []uint64 `json:"tokens,omitempty"`
	Damaged       bool     `json:"damaged"`
}

type transferGuarded struct {
	Lock    *transferRun `json:"lock"`
	Version *transferRun `json:"version"`
}

func init() {
	register(&scenario{
		order:     3,
		name:      "transfers",
		title:     "Two concurrent transfers into one account: A sends B 100 while C sends B 200",
		menu:      "two concurrent transfers into one account",
		menuGuard: "lock; version column",
		guard:     "a lock around read-modify-write; or a version column (state.Optimistic)",
		why: "both read 1000 before either writes, so the second write erases the first; " +
			"different operations, so no idempotency key can help",
		unit:         "lost transfers",
		crossProcess: true,
		tables:       []string{accountsTable},
		roles:        []*role{transferRole},
		play:         playTransfers,
	})
}

// transferRole is one instance doing its transfer.
var transferRole = roleOf("transfer", transfer)

// transferParams are one instance's transfer.
type transferParams struct {
	Key    string // the lock's
	Amount int64
	Hold   time.Duration // work between read and write
	TTL    time.Duration
}

func playTransfers(ctx context.Context, d *demo, s *Result) error {
	// Two processes, one per transfer, play every run: each run is a "go"
	// with the mode and the account to use.
	var parts []part
	for i, amount := range transferAmounts {
		parts = append(parts, part{name: fmt.Sprintf("instance %d", i+1), role: transferRole, locks: d.workerBackend(),
			params: transferParams{Key: d.key("account/B"), Amount: amount, Hold: transferHold, TTL: d.ttl(transferTTL)}})
	}
	procs, err := d.cast(ctx, parts...)
	if err != nil {
		return err
	}
	defer procs.kill()

	un := newTimeline()
	r, err := d.transferRun(ctx, "unguarded", procs, un)
	if err != nil {
		return fmt.Errorf("unguarded run: %w", err)
	}
	s.Unguarded, s.Timeline.Unguarded, s.Damage.Unguarded = r, un.sorted(), r.LostTransfers
	s.say("unguarded: B should be %d + 100 + 200 = %d, is %d: %s lost %s", r.Start, r.Expected, r.Final,
		plural(r.LostTransfers, "transfer", "transfers"), expected(r.Damaged))

	g := newTimeline()
	lk, err := d.transferRun(ctx, "lock", procs, g)
	if err != nil {
		return fmt.Errorf("guarded run (lock): %w", err)
	}
	ver, err := d.transferRun(ctx, "optimistic", procs, g)
	if err != nil {
		return fmt.Errorf("guarded run (version): %w", err)
	}
	s.Guarded = &transferGuarded{Lock: lk, Version: ver}
	s.Timeline.Guarded = g.sorted()
	s.Damage.Guarded = lk.LostTransfers + ver.LostTransfers
	s.OK = !lk.Damaged && !ver.Damaged
	turns := ""
	if len(lk.Tokens) == 2 {
		turns = fmt.Sprintf(" (they took turns: tokens %d, %d)", lk.Tokens[0], lk.Tokens[1])
	}
	s.say("guarded:   with the lock, B is %d%s %s", lk.Final, turns, mark(!lk.Damaged))
	s.say("%swith a version column, B is %d (%s, re-read and redone) %s", indent, ver.Final,
		plural(ver.Conflicts, "version conflict", "version conflicts"), mark(!ver.Damaged))
	return nil
}

// transferRun lets two workers do their transfer at once and counts what the
// account shows for it.
func (d *demo) transferRun(ctx context.Context, mode string, procs group, tl *timeline) (*transferRun, error) {
	account := d.key("B/" + mode)
	if err := setBalance(ctx, d.data, account, transferStart); err != nil {
		return nil, err
	}
	guard := map[string]string{"unguarded": "none", "lock": "lock", "optimistic": "version"}[mode]
	r := &transferRun{Guard: guard, Start: transferStart, Transfers: transferAmounts, Expected: transferStart}
	for _, a := range transferAmounts {
		r.Expected += a
	}
	// Both at once: the race is only fair if they run side by side.
	for _, p := range procs {
		if err := p.Send("go " + mode + " " + account); err != nil {
			return nil, err
		}
	}
	if err := r.follow(ctx, mode, procs, tl); err != nil {
		return nil, err
	}
	final, err := readBalance(ctx, d.data, account)
	if err != nil {
		return nil, err
	}
	r.Final = final
	r.LostMoney = r.Expected - final
	r.LostTransfers = lostTransfers(final-transferStart, transferAmounts)
	r.Damaged = r.LostTransfers != 0 || r.LostMoney != 0
	if mode == "lock" && !d.sabotage {
		r.Damaged = r.Damaged || len(r.Tokens) != 2 || r.Tokens[0] >= r.Tokens[1]
	}
	return r, nil
}

// follow puts each worker's reports of the run on the timeline until the
// worker is done, counts the version conflicts, and keeps the lock's tokens
// in the order they were taken.
func (r *transferRun) follow(ctx context.Context, mode string, procs group, tl *timeline) error {
	type acquisition struct {
		at    int64
		token uint64
	}
	var acquired []acquisition
	for i, p := range procs {
		from := []string{"A", "C"}[i]
		for {
			ev, err := p.Next(ctx, workerStartTimeout)
			if err != nil {
				return err
			}
			if ev.Kind == kindDone {
				break
			}
			switch ev.Kind {
			case kindAcquired:
				acquired = append(acquired, acquisition{ev.At, ev.Token})
			case kindRefused:
				r.Conflicts++
			}
			if what := r.describe(mode, from, transferAmounts[i], ev); what != "" {
				tl.event(p.name, ev, what)
			}
		}
	}
	slices.SortFunc(acquired, func(a, b acquisition) int { return cmp.Compare(a.at, b.at) })
	for _, a := range acquired {
		r.Tokens = append(r.Tokens, a.token)
	}
	return nil
}

// describe is what the timeline says of ev, reported by the worker with
// whom from sends amount; "" for a report it does not show.
func (r *transferRun) describe(mode, from string, amount int64, ev event) string {
	prefix := ""
	if mode != "unguarded" {
		prefix = r.Guard + ": "
	}
	switch ev.Kind {
	case kindAcquired:
		return fmt.Sprintf("%sacquired token %d", prefix, ev.Token)
	case kindRead:
		if mode == "optimistic" {
			return fmt.Sprintf("%sread B = %d at version %d (%s sends %d)", prefix, ev.Value, ev.Round-1, from, amount)
		}
		return fmt.Sprintf("%sread B = %d (%s sends %d)", prefix, ev.Value, from, amount)
	case kindRefused:
		return prefix + "write refused: the version moved on; read again"
	case kindApplied:
		return fmt.Sprintf("%swrote B = %d", prefix, ev.Value)
	case kindReleased:
		return prefix + "released"
	}
	return ""
}

// lostTransfers is how many of the amounts are missing from delta: the
// fewest left out of a subset that sums to delta (all of them if none does).
func lostTransfers(delta int64, amounts []int64) int {
	best := len(amounts)
	for set := 0; set < 1<<len(amounts); set++ {
		var sum int64
		in := 0
		for i, a := range amounts {
			if set&(1<<i) != 0 {
				sum += a
				in++
			}
		}
		if sum == delta {
			best = min(best, len(amounts)-in)
		}
	}
	return best
}

// transfer is one instance doing its transfer into an account once per
// "go MODE ACCOUNT" line: read, work, write; under the lock, or with the
// version check, or neither.
func transfer(ctx context.Context, w *worker, p transferParams) error {
	locker, err := w.locks(ctx)
	if err != nil {
		return err
	}
	w.ready(event{})
	for {
		f, err := w.order(ctx, "go", 3)
		if f == nil {
			return err
		}
		if err := transferOnce(ctx, w, locker, p, f[1], f[2]); err != nil {
			return err
		}
		w.emit(event{Kind: kindDone})
	}
}

func transferOnce(ctx context.Context, w *worker, locker lock.Locker, p transferParams, mode, account string) error {
	switch mode {
	case "unguarded":
		return transferRead(ctx, w, p, account, 0)
	case "lock":
		err := lock.Do(ctx, locker, p.Key, func(ctx context.Context, lease *lock.Lease) error {
			w.emit(event{Kind: kindAcquired, Token: lease.Token()})
			return transferRead(ctx, w, p, account, lease.Token())
		}, lock.WithTTL(p.TTL))
		if err == nil {
			w.emit(event{Kind: kindReleased})
		}
		return err
	case "optimistic":
		return transferOptimistic(ctx, w, p, account)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// transferRead reads the balance, works, and writes it plus the amount.
func transferRead(ctx context.Context, w *worker, p transferParams, account string, token uint64) error {
	v, err := readBalance(ctx, w.data, account)
	if err != nil {
		return err
	}
	w.emit(event{Kind: kindRead, Value: v})
	if err := sleep(ctx, p.Hold); err != nil {
		return err
	}
	if err := writeBalance(ctx, w.data, account, v+p.Amount); err != nil {
		return err
	}
	w.emit(event{Kind: kindApplied, Value: v + p.Amount, Token: token})
	return nil
}

// transferOptimistic is the transfer with a version check: a write after
// another's is refused, and the transfer reads and works again.
func transferOptimistic(ctx context.Context, w *worker, p transferParams, account string) error {
	o, err := state.NewOptimistic(w.data.DB, "demo_accounts", state.WithDialect(w.data.dialect))
	if err != nil {
		return err
	}
	var balance, version int64
	attempt := 0
	err = o.Update(ctx, account, state.Into{"balance": &balance, "version": &version}, func() (state.Values, error) {
		attempt++
		if attempt > 1 {
			w.emit(event{Kind: kindRefused, Round: attempt}) // the version moved on
		}
		w.emit(event{Kind: kindRead, Value: balance, Round: int(version) + 1})
		time.Sleep(p.Hold) // the same work; fn must not touch anything else
		return state.Values{"balance": balance + p.Amount}, nil
	})
	if err != nil {
		return err
	}
	w.emit(event{Kind: kindApplied, Value: balance + p.Amount})
	return nil
}
