package demo

import (
	"context"
	"errors"
	"fmt"
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

func init() {
	register(&scenario{
		order:     5,
		name:      "paused-holder",
		title:     fmt.Sprintf("A holder paused (SIGSTOP) past its %s lease writes late", seconds(pausedTTL)),
		menu:      "a holder paused past its lease writes late",
		menuGuard: "fencing token",
		guard: "the successor claims the row when it reads (sqlfence.Guard.Read puts its token on the row), " +
			"then writes with its token; a write needs token >= the row's",
		why: "the paused holder cannot know its lease ended, and no lock can stop a write already " +
			"under way; fencing the writes alone refuses it only once a newer token is on the row, " +
			"so the successor must claim the row before it reads",
		unit:         "lost updates (guarded: or stale writes applied)",
		crossProcess: true,
		tables:       []string{accountsTable},
		roles:        []*role{writerRole},
		play:         playPaused,
	})
}

// writerRole is a holder that writes whatever happens to its lease.
var writerRole = roleOf("writer", write)

// writerParams are a writer's.
type writerParams struct {
	Mode   string // unguarded, fence or claim
	Key    string // the lock's
	Row    string // the account
	Amount int64  // its debit
	Work   time.Duration
	TTL    time.Duration
	Wait   time.Duration // for the lock
	Forge  bool          // sabotage: a token no lock issued
	Step   bool          // wait for the demo's "write" between read and write
}

func playPaused(ctx context.Context, d *demo, s *Result) error {
	if !canPause {
		s.skip("pausing a process needs SIGSTOP")
		return nil
	}
	// For each of pausedModes a holder and a successor, all started at once.
	var parts []part
	for _, mode := range pausedModes {
		for i, a := range []struct {
			amount int64
			work   time.Duration
			wait   time.Duration
		}{{pausedHolderAmt, pausedWork, 0}, {pausedSuccAmt, 0, scenarioTimeout}} {
			parts = append(parts, part{name: fmt.Sprintf("instance %d", i+1), role: writerRole, locks: d.backend,
				params: writerParams{Mode: mode, Key: d.key("paused/" + mode), Row: d.key("P/" + mode),
					Amount: a.amount, Work: a.work, TTL: pausedTTL, Wait: a.wait,
					Step:  i == 1, // the demo says when the successor writes
					Forge: mode == "claim" && i == 0 && d.sabotage}})
		}
	}
	all, err := d.cast(ctx, parts...)
	if err != nil {
		return err
	}
	defer all.kill()
	var procs [3][2]*proc // pausedModes x [holder, successor]
	for g := range procs {
		procs[g] = [2]*proc{all[2*g], all[2*g+1]}
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
			return fmt.Errorf("%s run: %w", pausedRunNames[g], err)
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
	return nil
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
	say := func(p *proc, ev event, text string) { tl.event(p.name, ev, prefix+text) }

	if err := holder.Go(); err != nil {
		return nil, err
	}
	ev, err := holder.Expect(ctx, kindAcquired, workerStartTimeout)
	if err != nil {
		return nil, err
	}
	r.HolderToken = ev.Token
	say(holder, ev, fmt.Sprintf("acquired token %d (lease %s)", ev.Token, seconds(pausedTTL)))
	if ev, err = holder.Expect(ctx, kindRead, workerStartTimeout); err != nil {
		return nil, err
	}
	say(holder, ev, fmt.Sprintf("%s %d, will write %d", readVerb(mode), ev.Value, ev.Value-pausedHolderAmt))
	// Freeze it mid-work, as a stop-the-world pause would.
	if err := holder.Pause(); err != nil {
		return nil, err
	}
	pausedAt := time.Now()
	defer func() { _ = holder.Resume() }() // never leave it frozen
	tl.signal(pausedAt, kindPaused, holder.name, prefix+"SIGSTOP "+holder.name+": frozen mid-work, its renewals stop")

	if err := successor.Go(); err != nil {
		return nil, err
	}
	if ev, err = successor.Expect(ctx, kindAcquired, scenarioTimeout); err != nil {
		return nil, err
	}
	r.SuccessorToken = ev.Token
	say(successor, ev, fmt.Sprintf("acquired token %d: the frozen lease ran out", ev.Token))
	if ev, err = successor.Expect(ctx, kindRead, scenarioTimeout); err != nil {
		return nil, err
	}
	say(successor, ev, fmt.Sprintf("%s %d", readVerb(mode), ev.Value))

	resumed := time.Now()
	if err := holder.Resume(); err != nil {
		return nil, err
	}
	r.PausedMS = ms(resumed.Sub(pausedAt))
	tl.signal(resumed, kindResumed, holder.name, fmt.Sprintf("%sSIGCONT %s after %s: it goes on where it was", prefix,
		holder.name, seconds(resumed.Sub(pausedAt))))
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
	say func(*proc, event, string), expected *int64) (string, error) {
	outcome := ""
	for {
		ev, err := p.Next(ctx, scenarioTimeout)
		if err != nil {
			return "", err
		}
		switch ev.Kind {
		case kindLost:
			r.HolderToldLost = true
			say(p, ev, "told: lease lost (too late, the write is under way)")
		case kindApplied:
			outcome = "applied"
			*expected -= amount
			say(p, ev, fmt.Sprintf("write applied with token %d: balance %d", ev.Token, ev.Value))
		case kindRefused:
			outcome = "refused"
			say(p, ev, fmt.Sprintf("write refused: stale token %d < %d, nothing changed", ev.Token, r.SuccessorToken))
		case kindReleased:
			say(p, ev, "released")
		case kindNotHeld:
			ev.Kind = kindReleased
			say(p, ev, "release: the lock was no longer its own")
		case kindDone:
			return outcome, p.Wait(ctx)
		}
	}
}

// write takes the lock, reads the account, works, and writes the
// balance minus its amount: plainly (mode "unguarded"), with the fencing
// token on the write (mode "fence"), or claiming the row with the read and
// then writing with the token (mode "claim"). With -step it writes when the
// demo says so. Once it has started working it writes whatever happens to
// its lease, the way a process that was paused mid-work does: it made its
// checks before the pause.
func write(ctx context.Context, w *worker, p writerParams) error {
	locker, err := w.locks(ctx)
	if err != nil {
		return err
	}
	w.ready(event{})
	if err := w.awaitGo(ctx); err != nil {
		return err
	}
	lease, err := locker.Acquire(ctx, p.Key, lock.WithTTL(p.TTL), lock.WithWait(p.Wait))
	if err != nil {
		return err
	}
	w.emit(event{Kind: kindAcquired, Token: lease.Token()})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-lease.Done():
			if !errors.Is(lease.Err(), lock.ErrReleased) {
				w.emit(event{Kind: kindLost, Msg: lease.Err().Error()})
			}
		case <-ctx.Done():
		}
	}()
	g, err := sqlfence.New(w.data.DB, "demo_accounts", sqlfence.WithDialect(w.data.dialect))
	if err != nil {
		return err
	}
	var v int64
	if p.Mode == "claim" {
		err = g.Read(ctx, lease, p.Row, sqlfence.Into{"balance": &v})
	} else {
		v, err = readBalance(ctx, w.data, p.Row)
	}
	if err != nil {
		return err
	}
	w.emit(event{Kind: kindRead, Value: v})
	if p.Step {
		if _, err := w.order(ctx, "write", 1); err != nil {
			return err
		}
	}
	time.Sleep(p.Work)
	v -= p.Amount
	wctx := context.WithoutCancel(ctx)
	var h fence.Holder = lease
	if p.Forge {
		h = fence.Token(fence.MaxToken) // sabotage: a token no lock issued
	}
	if p.Mode == "unguarded" {
		err = writeBalance(wctx, w.data, p.Row, v)
	} else {
		err = g.Update(wctx, h, p.Row, sqlfence.Values{"balance": v})
	}
	switch {
	case errors.Is(err, fence.ErrStale):
		w.emit(event{Kind: kindRefused, Token: h.Token(), Value: v})
	case err != nil:
		return err
	default:
		w.emit(event{Kind: kindApplied, Token: h.Token(), Value: v})
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
		w.emit(event{Kind: kindNotHeld})
	case err != nil:
		return err
	default:
		w.emit(event{Kind: kindReleased})
	}
	<-watched
	w.emit(event{Kind: kindDone})
	return nil
}
