package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/lock"
)

// The seeds' fencing story: client A holds the lock with token 5 and stops (a
// GC pause); its lease runs out, B takes the lock with token 6 and writes; A
// wakes up and writes too, with token 5. The lock cannot stop that write: A
// is past every check it would make. The storage can, by refusing a token
// lower than one it has applied. Here A is a process frozen with SIGSTOP
// between reading an account and writing it back.
const (
	pausedTTL   = time.Second
	pausedStart = 1000
	// pausedWork is the holder's work between read and write, during which
	// it is frozen: longer than the time the demo needs to send SIGSTOP.
	pausedWork      = 800 * time.Millisecond
	pausedHolderAmt = 100
	pausedSuccAmt   = 300
)

type pausedRun struct {
	TTLMS           int64  `json:"ttl_ms"`
	HolderToken     uint64 `json:"holder_token"`
	SuccessorToken  uint64 `json:"successor_token"`
	PausedMS        int64  `json:"paused_ms"`
	SuccessorWrote  int64  `json:"successor_wrote"`
	LateWrite       string `json:"late_write"` // applied or refused
	HolderToldLost  bool   `json:"holder_told_lease_lost"`
	Final           int64  `json:"final"`
	Expected        int64  `json:"expected"`
	OverwrittenWrit int    `json:"overwritten_writes"`
	Damaged         bool   `json:"damaged"`
}

func (d *demo) paused(ctx context.Context) *scenario {
	s := &scenario{
		Name:  "paused-holder",
		Title: fmt.Sprintf("A holder paused (SIGSTOP) past its %s lease writes late", seconds(pausedTTL)),
		Guard: "fencing token checked by the database (sqlfence): a write needs token >= the row's",
		Why: "the paused holder cannot know its lease ended, and no lock can stop a write already " +
			"under way; the row refuses a token lower than one it has applied",
		Damage: damage{Unit: "overwritten writes"},
		OK:     true,
	}
	if d.skipInProcess(s) {
		return s
	}
	if !canPause {
		s.Skipped = "pausing a process needs SIGSTOP"
		s.say("skipped: %s", s.Skipped)
		return s
	}
	var procs [2][2]*proc // [unguarded, guarded] x [holder, successor]
	defer func() {
		for _, run := range procs {
			for _, p := range run {
				if p != nil {
					p.Kill()
				}
			}
		}
	}()
	for g, mode := range []string{"unguarded", "fence"} {
		key := d.key("paused/" + mode)
		row := d.key("P/" + mode)
		for i, a := range []struct {
			amount int64
			work   time.Duration
			wait   time.Duration
		}{{pausedHolderAmt, pausedWork, 0}, {pausedSuccAmt, 20 * time.Millisecond, scenarioTimeout}} {
			args := []string{"-role", "writer", "-id", strconv.Itoa(i + 1), "-mode", mode, "-key", key, "-row", row,
				"-amount", strconv.FormatInt(a.amount, 10), "-hold", a.work.String(),
				"-ttl", pausedTTL.String(), "-wait", a.wait.String()}
			if g == 1 && i == 0 && d.sabotage {
				args = append(args, "-forge")
			}
			p, err := d.start(ctx, fmt.Sprintf("instance %d", i+1), d.backend, args...)
			if err != nil {
				return s.failed(err)
			}
			procs[g][i] = p
		}
	}
	for _, run := range procs {
		if _, err := wantReady(ctx, run[:]...); err != nil {
			return s.failed(err)
		}
	}
	// Both runs at once: each spends most of its time waiting for a lease
	// to run out.
	var (
		wg      sync.WaitGroup
		results [2]*pausedRun
		tls     [2]*timeline
		errs    [2]error
	)
	for g := range procs {
		wg.Go(func() {
			tls[g] = newTimeline()
			results[g], errs[g] = d.pausedRun(ctx, g == 1, procs[g][0], procs[g][1], tls[g])
		})
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			return s.failed(fmt.Errorf("%s run: %w", runName(g == 1), err))
		}
	}
	un, gd := results[0], results[1]
	s.Unguarded, s.Timeline.Unguarded, s.Damage.Unguarded = un, tls[0].sorted(), un.OverwrittenWrit
	s.Guarded, s.Timeline.Guarded, s.Damage.Guarded = gd, tls[1].sorted(), gd.OverwrittenWrit
	s.OK = !gd.Damaged
	s.say("unguarded: the late write (token %d) was %s: balance %d, should be %d %s", un.HolderToken,
		un.LateWrite, un.Final, un.Expected, expected(un.Damaged))
	s.say("guarded:   the late write (token %d < %d) was %s: balance %d %s", gd.HolderToken,
		gd.SuccessorToken, gd.LateWrite, gd.Final, mark(s.OK))
	return s
}

func (d *demo) pausedRun(ctx context.Context, guarded bool, holder, successor *proc, tl *timeline) (*pausedRun, error) {
	mode := "unguarded"
	if guarded {
		mode = "fence"
	}
	account := d.key("P/" + mode)
	if err := setBalance(ctx, d.data, account, pausedStart); err != nil {
		return nil, err
	}
	r := &pausedRun{TTLMS: ms(pausedTTL), Expected: pausedStart - pausedSuccAmt}
	prefix := map[bool]string{false: "", true: "fenced "}[guarded]

	if err := holder.Go(); err != nil {
		return nil, err
	}
	ev, err := holder.Expect(ctx, "acquired", workerStartTimeout)
	if err != nil {
		return nil, err
	}
	r.HolderToken = ev.Token
	tl.addUnix(ev.At, holder.name, "acquired", fmt.Sprintf("acquired token %d (lease %s)", ev.Token, seconds(pausedTTL)), ev.Token)
	if ev, err = holder.Expect(ctx, "read", workerStartTimeout); err != nil {
		return nil, err
	}
	tl.addUnix(ev.At, holder.name, "read", fmt.Sprintf("read balance %d, will write %d", ev.Value, ev.Value-pausedHolderAmt), 0)
	// Freeze it mid-work, as a stop-the-world pause would.
	if err := holder.Pause(); err != nil {
		return nil, err
	}
	pausedAt := time.Now()
	defer func() { _ = holder.Resume() }() // never leave it frozen
	tl.add(pausedAt, "demo", "paused", "SIGSTOP "+holder.name+": frozen mid-work, its renewals stop", 0)

	if err := successor.Go(); err != nil {
		return nil, err
	}
	for done := false; !done; {
		ev, err := successor.Next(ctx, scenarioTimeout)
		if err != nil {
			return nil, err
		}
		switch ev.Ev {
		case "acquired":
			r.SuccessorToken = ev.Token
			tl.addUnix(ev.At, successor.name, "acquired", fmt.Sprintf("acquired token %d: the frozen lease ran out", ev.Token), ev.Token)
		case "read":
			tl.addUnix(ev.At, successor.name, "read", fmt.Sprintf("read balance %d", ev.Value), 0)
		case "applied":
			r.SuccessorWrote = ev.Value
			tl.addUnix(ev.At, successor.name, "applied", fmt.Sprintf("%swrite applied: balance %d", prefix, ev.Value), ev.Token)
		case "refused":
			return nil, fmt.Errorf("%s: its write with the newest token was refused", successor.name)
		case "released":
			tl.addUnix(ev.At, successor.name, "released", "released", 0)
		case "done":
			done = true
		}
	}
	if err := successor.Wait(ctx); err != nil {
		return nil, err
	}

	resumed := time.Now()
	if err := holder.Resume(); err != nil {
		return nil, err
	}
	r.PausedMS = ms(resumed.Sub(pausedAt))
	tl.add(resumed, "demo", "resumed", fmt.Sprintf("SIGCONT %s after %s: it goes on where it was", holder.name,
		seconds(resumed.Sub(pausedAt))), 0)
	for done := false; !done; {
		ev, err := holder.Next(ctx, scenarioTimeout)
		if err != nil {
			return nil, err
		}
		switch ev.Ev {
		case "lease":
			r.HolderToldLost = true
			tl.addUnix(ev.At, holder.name, "lost", "told: lease lost (too late, the write is under way)", 0)
		case "applied":
			r.LateWrite = "applied"
			r.OverwrittenWrit = 1
			tl.addUnix(ev.At, holder.name, "applied", fmt.Sprintf("%swrite applied with token %d: balance %d, "+
				"the successor's write is gone", prefix, ev.Token, ev.Value), ev.Token)
		case "refused":
			r.LateWrite = "refused"
			tl.addUnix(ev.At, holder.name, "refused", fmt.Sprintf("write refused: stale token %d < %d, nothing changed",
				ev.Token, r.SuccessorToken), ev.Token)
		case "released":
			tl.addUnix(ev.At, holder.name, "released", "released", 0)
		case "notheld":
			tl.addUnix(ev.At, holder.name, "released", "release: the lock was no longer its own", 0)
		case "done":
			done = true
		}
	}
	if err := holder.Wait(ctx); err != nil {
		return nil, err
	}
	if r.Final, err = readBalance(ctx, d.data, account); err != nil {
		return nil, err
	}
	r.Damaged = r.LateWrite != "refused" || r.Final != r.Expected || r.SuccessorToken <= r.HolderToken
	if !guarded {
		r.Damaged = r.LateWrite == "applied" || r.Final != r.Expected
	}
	return r, nil
}

// writerRole takes the lock, reads the account, works, and writes the
// balance minus its amount: with the fencing token (mode "fence") or
// plainly. Once it has started working it writes whatever happens to its
// lease, the way a process that was paused mid-work does: it made its checks
// before the pause.
func writerRole(ctx context.Context, w *workerEnv, ready func(event)) error {
	ready(event{})
	if err := w.awaitGo(ctx); err != nil {
		return err
	}
	lease, err := w.locker.Acquire(ctx, w.c.key, lock.WithTTL(w.c.ttl), lock.WithWait(w.c.wait))
	if err != nil {
		return err
	}
	w.emit(event{Ev: "acquired", Token: lease.Token()})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-lease.Done():
			if !errors.Is(lease.Err(), lock.ErrReleased) {
				w.emit(event{Ev: "lease", Msg: lease.Err().Error()})
			}
		case <-ctx.Done():
		}
	}()
	v, err := readBalance(ctx, w.data, w.c.row)
	if err != nil {
		return err
	}
	w.emit(event{Ev: "read", Value: v})
	time.Sleep(w.c.hold)
	v -= w.c.amount
	wctx := context.WithoutCancel(ctx)
	if w.c.mode == "fence" {
		g, err := sqlfence.New(w.data.DB, "demo_accounts", sqlfence.WithDialect(w.data.dialect))
		if err != nil {
			return err
		}
		var h fence.Holder = lease
		if w.c.forge {
			h = fence.Token(fence.MaxToken) // sabotage: a token no lock issued
		}
		err = g.Update(wctx, h, w.c.row, sqlfence.Values{"balance": v})
		switch {
		case errors.Is(err, fence.ErrStale):
			w.emit(event{Ev: "refused", Token: h.Token(), Value: v})
		case err != nil:
			return err
		default:
			w.emit(event{Ev: "applied", Token: h.Token(), Value: v})
		}
	} else {
		if err := writeBalance(wctx, w.data, w.c.row, v); err != nil {
			return err
		}
		w.emit(event{Ev: "applied", Token: lease.Token(), Value: v})
	}
	// A holder whose lease is gone cannot release it: the backend says
	// ErrNotHeld, or (ZooKeeper, whose session expired during the pause)
	// fails to reach the lock at all. Either way the lock is not its own.
	err = lease.Release(wctx)
	lost := false
	select {
	case <-lease.Done():
		lost = !errors.Is(lease.Err(), lock.ErrReleased)
	default:
	}
	switch {
	case errors.Is(err, lock.ErrNotHeld), err != nil && lost:
		w.emit(event{Ev: "notheld"})
	case err != nil:
		return err
	default:
		w.emit(event{Ev: "released"})
	}
	<-watched
	w.emit(event{Ev: "done"})
	return nil
}
