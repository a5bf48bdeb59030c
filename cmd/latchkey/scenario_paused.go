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

// A holder paused past its lease: instance 1 holds the lock, reads the
// account and is frozen with SIGSTOP (a GC pause, a VM freeze) before it
// writes. Its lease runs out; instance 2 takes the lock with a higher token
// and reads the account. Instance 1 wakes and writes its debit; then
// instance 2 writes its own, computed from its read. No lock can stop
// instance 1's write: it is past every check it would make. Unguarded, and
// with fenced writes alone (the row still carries an old token when the
// late write arrives), instance 2's write erases the late debit that the
// account acknowledged. With the claim first, instance 2's read puts its
// token on the row, and the late write is refused.
const (
	pausedTTL   = time.Second
	pausedStart = 1000
	// pausedWork is the holder's work between read and write, during which
	// it is frozen: longer than the time the demo needs to send SIGSTOP.
	pausedWork      = 800 * time.Millisecond
	pausedHolderAmt = 100
	pausedSuccAmt   = 300
)

// The paused-holder runs, by the worker mode each plays: unguarded, writes
// fenced, and claim first (sqlfence.Guard.Read, then the fenced write).
var pausedModes = []string{"unguarded", "fence", "claim"}

type pausedRun struct {
	Guard          string `json:"guard"` // none, fenced writes, claim first
	TTLMS          int64  `json:"ttl_ms"`
	HolderToken    uint64 `json:"holder_token"`
	SuccessorToken uint64 `json:"successor_token"`
	PausedMS       int64  `json:"paused_ms"`
	LateWrite      string `json:"late_write"`      // applied or refused
	SuccessorWrite string `json:"successor_write"` // applied or refused
	HolderToldLost bool   `json:"holder_told_lease_lost"`
	Final          int64  `json:"final"`
	Expected       int64  `json:"expected"` // the start minus every debit the account acknowledged
	LostUpdates    int    `json:"lost_updates"`
	Damaged        bool   `json:"damaged"`
}

// pausedUnguarded are the runs whose damage is expected.
type pausedUnguarded struct {
	None        *pausedRun `json:"none"`
	FencedWrite *pausedRun `json:"fenced_writes"`
}

func (d *demo) paused(ctx context.Context) *scenario {
	s := &scenario{
		Name:  "paused-holder",
		Title: fmt.Sprintf("A holder paused (SIGSTOP) past its %s lease writes late", seconds(pausedTTL)),
		Guard: "the successor claims the row when it reads (sqlfence.Guard.Read puts its token on the row), " +
			"then writes with its token; a write needs token >= the row's",
		Why: "the paused holder cannot know its lease ended, and no lock can stop a write already " +
			"under way; fencing the writes alone refuses it only once a newer token is on the row, " +
			"so the successor must claim the row before it reads",
		Damage: damage{Unit: "lost updates (guarded: or stale writes applied)"},
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
	var procs [3][2]*proc // pausedModes x [holder, successor]
	defer func() {
		for _, run := range procs {
			for _, p := range run {
				if p != nil {
					p.Kill()
				}
			}
		}
	}()
	for g, mode := range pausedModes {
		key := d.key("paused/" + mode)
		row := d.key("P/" + mode)
		for i, a := range []struct {
			amount int64
			work   time.Duration
			wait   time.Duration
		}{{pausedHolderAmt, pausedWork, 0}, {pausedSuccAmt, 0, scenarioTimeout}} {
			args := []string{"-role", "writer", "-id", strconv.Itoa(i + 1), "-mode", mode, "-key", key, "-row", row,
				"-amount", strconv.FormatInt(a.amount, 10), "-hold", a.work.String(),
				"-ttl", pausedTTL.String(), "-wait", a.wait.String()}
			if i == 1 {
				args = append(args, "-step") // the demo says when it writes
			}
			if mode == "claim" && i == 0 && d.sabotage {
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
	// The unguarded runs one after the other on one timeline, the guarded
	// run beside them: each spends most of its time waiting for a lease to
	// run out.
	var (
		wg      sync.WaitGroup
		results [3]*pausedRun
		errs    [3]error
		tlU     = newTimeline()
		tlG     = newTimeline()
	)
	wg.Go(func() {
		for g := range 2 {
			if results[g], errs[g] = d.pausedRun(ctx, pausedModes[g], procs[g][0], procs[g][1], tlU); errs[g] != nil {
				return
			}
		}
	})
	wg.Go(func() { results[2], errs[2] = d.pausedRun(ctx, "claim", procs[2][0], procs[2][1], tlG) })
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			return s.failed(fmt.Errorf("%s run: %w", pausedRunNames[g], err))
		}
	}
	un, fw, gd := results[0], results[1], results[2]
	s.Unguarded, s.Timeline.Unguarded = &pausedUnguarded{None: un, FencedWrite: fw}, tlU.sorted()
	s.Damage.Unguarded = un.LostUpdates + fw.LostUpdates
	s.Guarded, s.Timeline.Guarded = gd, tlG.sorted()
	s.Damage.Guarded = gd.LostUpdates
	if gd.LateWrite != "refused" {
		s.Damage.Guarded++
	}
	s.OK = !gd.Damaged
	s.say("unguarded: the late write (token %d) was %s, then the successor's erased it: balance %d, "+
		"should be %d %s", un.HolderToken, un.LateWrite, un.Final, un.Expected, expected(un.Damaged))
	s.say("%swith fenced writes only, the late write (token %d < %d) was %s too: the row still had "+
		"token 0; balance %d, should be %d %s", indent, fw.HolderToken, fw.SuccessorToken, fw.LateWrite,
		fw.Final, fw.Expected, expected(fw.Damaged))
	s.say("guarded:   the successor's read claimed the row first; the late write (token %d < %d) was %s: "+
		"balance %d %s", gd.HolderToken, gd.SuccessorToken, gd.LateWrite, gd.Final, mark(s.OK))
	return s
}

// pausedRunNames name the runs of pausedModes in errors.
var pausedRunNames = []string{"unguarded", "fenced-writes", "guarded"}

// pausedRun plays the interleaving: the holder reads and is paused; the
// successor, once the lease has run out, takes the lock and reads; the
// holder is resumed and writes; then the successor writes.
func (d *demo) pausedRun(ctx context.Context, mode string, holder, successor *proc, tl *timeline) (*pausedRun, error) {
	account := d.key("P/" + mode)
	if err := setBalance(ctx, d.data, account, pausedStart); err != nil {
		return nil, err
	}
	r := &pausedRun{Guard: map[string]string{"unguarded": "none", "fence": "fenced writes", "claim": "claim first"}[mode],
		TTLMS: ms(pausedTTL)}
	prefix := map[string]string{"unguarded": "no fence: ", "fence": "fenced writes: ", "claim": ""}[mode]
	say := func(ns int64, p *proc, kind, event string, token uint64) {
		tl.addUnix(ns, p.name, kind, prefix+event, token)
	}

	if err := holder.Go(); err != nil {
		return nil, err
	}
	ev, err := holder.Expect(ctx, "acquired", workerStartTimeout)
	if err != nil {
		return nil, err
	}
	r.HolderToken = ev.Token
	say(ev.At, holder, "acquired", fmt.Sprintf("acquired token %d (lease %s)", ev.Token, seconds(pausedTTL)), ev.Token)
	if ev, err = holder.Expect(ctx, "read", workerStartTimeout); err != nil {
		return nil, err
	}
	say(ev.At, holder, "read", fmt.Sprintf("%s %d, will write %d", readVerb(mode), ev.Value, ev.Value-pausedHolderAmt), 0)
	// Freeze it mid-work, as a stop-the-world pause would.
	if err := holder.Pause(); err != nil {
		return nil, err
	}
	pausedAt := time.Now()
	defer func() { _ = holder.Resume() }() // never leave it frozen
	tl.add(pausedAt, "demo", "paused", prefix+"SIGSTOP "+holder.name+": frozen mid-work, its renewals stop", 0)

	if err := successor.Go(); err != nil {
		return nil, err
	}
	if ev, err = successor.Expect(ctx, "acquired", scenarioTimeout); err != nil {
		return nil, err
	}
	r.SuccessorToken = ev.Token
	say(ev.At, successor, "acquired", fmt.Sprintf("acquired token %d: the frozen lease ran out", ev.Token), ev.Token)
	if ev, err = successor.Expect(ctx, "read", scenarioTimeout); err != nil {
		return nil, err
	}
	say(ev.At, successor, "read", fmt.Sprintf("%s %d", readVerb(mode), ev.Value), 0)

	resumed := time.Now()
	if err := holder.Resume(); err != nil {
		return nil, err
	}
	r.PausedMS = ms(resumed.Sub(pausedAt))
	tl.add(resumed, "demo", "resumed", fmt.Sprintf("%sSIGCONT %s after %s: it goes on where it was", prefix,
		holder.name, seconds(resumed.Sub(pausedAt))), 0)
	expected := int64(pausedStart)
	if r.LateWrite, err = d.pausedWrites(ctx, holder, pausedHolderAmt, r, say, &expected); err != nil {
		return nil, err
	}
	if err := successor.Send("write"); err != nil {
		return nil, err
	}
	if r.SuccessorWrite, err = d.pausedWrites(ctx, successor, pausedSuccAmt, r, say, &expected); err != nil {
		return nil, err
	}
	if r.Final, err = readBalance(ctx, d.data, account); err != nil {
		return nil, err
	}
	r.Expected = expected
	if r.Final != r.Expected {
		r.LostUpdates = 1
	}
	r.Damaged = r.Final != r.Expected
	if mode == "claim" {
		r.Damaged = r.Damaged || r.LateWrite != "refused" || r.SuccessorWrite != "applied" ||
			r.SuccessorToken <= r.HolderToken
	}
	return r, nil
}

func readVerb(mode string) string {
	if mode == "claim" {
		return "claimed the row and read balance"
	}
	return "read balance"
}

// pausedWrites follows one worker from its write to its end, records what
// it says, and returns its write's outcome. An applied write lowers expected
// by its debit, amount: the account acknowledged it.
func (d *demo) pausedWrites(ctx context.Context, p *proc, amount int64, r *pausedRun,
	say func(int64, *proc, string, string, uint64), expected *int64) (string, error) {
	outcome := ""
	for {
		ev, err := p.Next(ctx, scenarioTimeout)
		if err != nil {
			return "", err
		}
		switch ev.Ev {
		case "lease":
			r.HolderToldLost = true
			say(ev.At, p, "lost", "told: lease lost (too late, the write is under way)", 0)
		case "applied":
			outcome = "applied"
			*expected -= amount
			say(ev.At, p, "applied", fmt.Sprintf("write applied with token %d: balance %d", ev.Token, ev.Value), ev.Token)
		case "refused":
			outcome = "refused"
			say(ev.At, p, "refused", fmt.Sprintf("write refused: stale token %d < %d, nothing changed", ev.Token,
				r.SuccessorToken), ev.Token)
		case "released":
			say(ev.At, p, "released", "released", 0)
		case "notheld":
			say(ev.At, p, "released", "release: the lock was no longer its own", 0)
		case "done":
			return outcome, p.Wait(ctx)
		}
	}
}

// writerRole takes the lock, reads the account, works, and writes the
// balance minus its amount: plainly (mode "unguarded"), with the fencing
// token on the write (mode "fence"), or claiming the row with the read and
// then writing with the token (mode "claim"). With -step it writes when the
// demo says so. Once it has started working it writes whatever happens to
// its lease, the way a process that was paused mid-work does: it made its
// checks before the pause.
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
	g, err := sqlfence.New(w.data.DB, "demo_accounts", sqlfence.WithDialect(w.data.dialect))
	if err != nil {
		return err
	}
	var v int64
	if w.c.mode == "claim" {
		err = g.Read(ctx, lease, w.c.row, sqlfence.Into{"balance": &v})
	} else {
		v, err = readBalance(ctx, w.data, w.c.row)
	}
	if err != nil {
		return err
	}
	w.emit(event{Ev: "read", Value: v})
	if w.c.step {
		if _, err := w.order(ctx, "write", 1); err != nil {
			return err
		}
	}
	time.Sleep(w.c.hold)
	v -= w.c.amount
	wctx := context.WithoutCancel(ctx)
	var h fence.Holder = lease
	if w.c.forge {
		h = fence.Token(fence.MaxToken) // sabotage: a token no lock issued
	}
	if w.c.mode == "unguarded" {
		err = writeBalance(wctx, w.data, w.c.row, v)
	} else {
		err = g.Update(wctx, h, w.c.row, sqlfence.Values{"balance": v})
	}
	switch {
	case errors.Is(err, fence.ErrStale):
		w.emit(event{Ev: "refused", Token: h.Token(), Value: v})
	case err != nil:
		return err
	default:
		w.emit(event{Ev: "applied", Token: h.Token(), Value: v})
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
