package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
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

func (d *demo) transfers(ctx context.Context) *scenario {
	s := &scenario{
		Name:  "transfers",
		Title: "Two concurrent transfers into one account: A sends B 100 while C sends B 200",
		Guard: "a lock around read-modify-write; or a version column (state.Optimistic)",
		Why: "both read 1000 before either writes, so the second write erases the first; " +
			"different operations, so no idempotency key can help",
		Damage: damage{Unit: "lost transfers"},
		OK:     true,
	}
	if d.skipInProcess(s) {
		return s
	}
	// Two processes, one per transfer, play every run: each run is a "go"
	// with the mode and the account to use.
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.Kill()
		}
	}()
	for i, amount := range transferAmounts {
		p, err := d.start(ctx, fmt.Sprintf("instance %d", i+1), d.workerBackend(), "-role", "transfer",
			"-id", strconv.Itoa(i+1), "-key", d.key("account/B"),
			"-amount", strconv.FormatInt(amount, 10), "-hold", transferHold.String(), "-ttl", d.ttl(transferTTL).String())
		if err != nil {
			return s.failed(err)
		}
		procs = append(procs, p)
	}
	if _, err := wantReady(ctx, procs...); err != nil {
		return s.failed(err)
	}

	un := newTimeline()
	r, err := d.transferRun(ctx, "unguarded", procs, un)
	if err != nil {
		return s.failed(fmt.Errorf("unguarded run: %w", err))
	}
	s.Unguarded, s.Timeline.Unguarded, s.Damage.Unguarded = r, un.sorted(), r.LostTransfers
	s.say("unguarded: B should be %d + 100 + 200 = %d, is %d: %s lost %s", r.Start, r.Expected, r.Final,
		plural(r.LostTransfers, "transfer", "transfers"), expected(r.Damaged))

	g := newTimeline()
	lk, err := d.transferRun(ctx, "lock", procs, g)
	if err != nil {
		return s.failed(fmt.Errorf("guarded run (lock): %w", err))
	}
	ver, err := d.transferRun(ctx, "optimistic", procs, g)
	if err != nil {
		return s.failed(fmt.Errorf("guarded run (version): %w", err))
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
	return s
}

// transferRun lets two workers do their transfer at once and counts what the
// account shows for it.
func (d *demo) transferRun(ctx context.Context, mode string, procs []*proc, tl *timeline) (*transferRun, error) {
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
				return nil, err
			}
			if ev.Ev == "done" {
				break
			}
			prefix := ""
			if mode != "unguarded" {
				prefix = guard + ": "
			}
			switch ev.Ev {
			case "acquired":
				acquired = append(acquired, acquisition{ev.At, ev.Token})
				tl.addUnix(ev.At, p.name, "acquired", fmt.Sprintf("%sacquired token %d", prefix, ev.Token), ev.Token)
			case "read":
				what := fmt.Sprintf("%sread B = %d (%s sends %d)", prefix, ev.Value, from, transferAmounts[i])
				if mode == "optimistic" {
					what = fmt.Sprintf("%sread B = %d at version %d (%s sends %d)", prefix, ev.Value, ev.Round-1, from, transferAmounts[i])
				}
				tl.addUnix(ev.At, p.name, "read", what, 0)
			case "conflict":
				r.Conflicts++
				tl.addUnix(ev.At, p.name, "refused", prefix+"write refused: the version moved on; read again", 0)
			case "applied":
				tl.addUnix(ev.At, p.name, "applied", fmt.Sprintf("%swrote B = %d", prefix, ev.Value), ev.Token)
			case "released":
				tl.addUnix(ev.At, p.name, "released", prefix+"released", 0)
			}
		}
	}
	slices.SortFunc(acquired, func(a, b acquisition) int { return cmp.Compare(a.at, b.at) })
	for _, a := range acquired {
		r.Tokens = append(r.Tokens, a.token)
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

// transferRole is one instance doing its transfer into an account once per
// "go MODE ACCOUNT" line: read, work, write; under the lock, or with the
// version check, or neither.
func transferRole(ctx context.Context, w *workerEnv, ready func(event)) error {
	ready(event{})
	for {
		f, err := w.order(ctx, "go", 3)
		if f == nil {
			return err
		}
		w.c.mode, w.c.row = f[1], f[2]
		if err := w.transferOnce(ctx); err != nil {
			return err
		}
		w.emit(event{Ev: "done"})
	}
}

func (w *workerEnv) transferOnce(ctx context.Context) error {
	var err error
	switch w.c.mode {
	case "unguarded":
		err = w.transfer(ctx, 0)
	case "lock":
		err = lock.Do(ctx, w.locker, w.c.key, func(ctx context.Context, lease *lock.Lease) error {
			w.emit(event{Ev: "acquired", Token: lease.Token()})
			return w.transfer(ctx, lease.Token())
		}, lock.WithTTL(w.c.ttl))
		if err == nil {
			w.emit(event{Ev: "released"})
		}
	case "optimistic":
		err = w.transferOptimistic(ctx)
	default:
		err = fmt.Errorf("unknown mode %q", w.c.mode)
	}
	return err
}

func (w *workerEnv) transfer(ctx context.Context, token uint64) error {
	v, err := readBalance(ctx, w.data, w.c.row)
	if err != nil {
		return err
	}
	w.emit(event{Ev: "read", Value: v})
	if err := sleep(ctx, w.c.hold); err != nil {
		return err
	}
	if err := writeBalance(ctx, w.data, w.c.row, v+w.c.amount); err != nil {
		return err
	}
	w.emit(event{Ev: "applied", Value: v + w.c.amount, Token: token})
	return nil
}

func (w *workerEnv) transferOptimistic(ctx context.Context) error {
	o, err := state.NewOptimistic(w.data.DB, "demo_accounts", state.WithDialect(w.data.dialect))
	if err != nil {
		return err
	}
	var balance, version int64
	attempt := 0
	err = o.Update(ctx, w.c.row, state.Into{"balance": &balance, "version": &version}, func() (state.Values, error) {
		attempt++
		if attempt > 1 {
			w.emit(event{Ev: "conflict", Round: attempt})
		}
		w.emit(event{Ev: "read", Value: balance, Round: int(version) + 1})
		time.Sleep(w.c.hold) // the same work; fn must not touch anything else
		return state.Values{"balance": balance + w.c.amount}, nil
	})
	if err != nil {
		return err
	}
	w.emit(event{Ev: "applied", Value: balance + w.c.amount})
	return nil
}
