package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// "Forgot to unlock": a holder dies without releasing. Here it is a process
// killed with SIGKILL mid-lease. A lock without a lease stays taken forever; a
// lease runs out.
const (
	crashTTL = 1500 * time.Millisecond
	// crashKillAfter is how long the holder lives with the lock: past one
	// renewal (TTL/3), so the demo shows renewal stopping, not the first
	// lease running out.
	crashKillAfter = 700 * time.Millisecond
	// crashGrace is how long past the TTL the successor may wait before the
	// lock counts as stuck.
	crashGrace = 4 * time.Second
)

type crashUnguarded struct {
	HolderPID     int   `json:"holder_pid"`
	StillHeldMS   int64 `json:"still_held_after_ms"` // after the kill, when last checked
	StuckForever  bool  `json:"stuck"`               // nothing will ever free it
	ReleasedByTTL bool  `json:"released_by_ttl"`
	Damaged       bool  `json:"damaged"`
}

type crashGuarded struct {
	TTLMS          int64  `json:"ttl_ms"`
	HolderPID      int    `json:"holder_pid"`
	HolderToken    uint64 `json:"holder_token"`
	KilledAfterMS  int64  `json:"killed_after_ms"` // into the lease
	ImmediateTry   string `json:"immediate_try"`   // "refused" (right) or "acquired"
	Acquired       bool   `json:"acquired"`
	WaitedMS       int64  `json:"waited_ms"` // from the kill to the successor's lease
	SuccessorToken uint64 `json:"successor_token,omitempty"`
	TokenHigher    bool   `json:"token_higher"`
	Damaged        bool   `json:"damaged"`
}

func (d *demo) crash(ctx context.Context) *scenario {
	s := &scenario{
		Name:   "forgot-to-unlock",
		Title:  fmt.Sprintf("Forgot to unlock: the holder is killed (SIGKILL) mid-lease; lease TTL %s", seconds(crashTTL)),
		Guard:  "a lease: renewed while its holder lives, expiring after the TTL when it dies",
		Why:    "a dead process cannot renew its lease, so the lock frees itself after the TTL, never before",
		Damage: damage{Unit: "locks stuck forever or taken too early"},
		OK:     true,
	}
	if d.skipInProcess(s) {
		return s
	}
	tlU, tlG := newTimeline(), newTimeline()
	un, g, err := d.crashRun(ctx, tlU, tlG)
	if err != nil {
		return s.failed(err)
	}
	s.Unguarded, s.Guarded = un, g
	s.Timeline.Unguarded, s.Timeline.Guarded = tlU.sorted(), tlG.sorted()
	s.Damage.Unguarded, s.Damage.Guarded = b2i(un.Damaged), b2i(g.Damaged)
	s.OK = !g.Damaged
	state := "still held"
	if un.ReleasedByTTL {
		state = "free"
	}
	s.say("unguarded: a lock row with no lease, holder pid %d killed: %s %s after the kill",
		un.HolderPID, state, seconds(time.Duration(un.StillHeldMS)*time.Millisecond))
	s.say("%sand forever: nothing but its dead holder would delete it %s", indent, expected(un.Damaged))
	s.say("guarded:   pid %d took the lease (token %d), killed %s in", g.HolderPID, g.HolderToken,
		seconds(time.Duration(g.KilledAfterMS)*time.Millisecond))
	refused := g.ImmediateTry == "refused"
	if refused {
		s.say("%sright after the kill: try refused, the dead holder's lease still runs %s", indent, check)
	} else {
		s.say("%sright after the kill: try ACQUIRED while the holder's lease should run %s", indent, cross)
	}
	if g.Acquired {
		cmp := ">"
		if !g.TokenHigher {
			cmp = "<="
		}
		s.say("%sacquired %s after the kill, token %d %s %d %s", indent,
			seconds(time.Duration(g.WaitedMS)*time.Millisecond), g.SuccessorToken, cmp, g.HolderToken, mark(g.TokenHigher))
	} else {
		s.say("%snot acquired within %s of the kill: the lock is stuck %s", indent,
			seconds(crashTTL+crashGrace), cross)
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (d *demo) crashRun(ctx context.Context, tlU, tlG *timeline) (*crashUnguarded, *crashGuarded, error) {
	key, naive := d.key("job"), d.key("job")
	common := []string{"-role", "hold", "-key", key, "-row", naive, "-ttl", crashTTL.String()}
	holder, err := d.start(ctx, "instance 1", d.workerBackend(), append(common, "-id", "1", "-mode", "lease")...)
	if err != nil {
		return nil, nil, err
	}
	defer holder.Kill()
	naiveHolder, err := d.start(ctx, "instance 1", "", append(common, "-id", "2", "-mode", "unguarded")...)
	if err != nil {
		return nil, nil, err
	}
	defer naiveHolder.Kill()

	g := &crashGuarded{TTLMS: ms(crashTTL)}
	un := &crashUnguarded{}
	for _, p := range []*proc{holder, naiveHolder} {
		if _, err := p.Expect(ctx, "ready", 15*time.Second); err != nil {
			return nil, nil, err
		}
		if err := p.Go(); err != nil {
			return nil, nil, err
		}
	}
	ev, err := holder.Expect(ctx, "holding", 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	held := time.Now()
	g.HolderPID, g.HolderToken = ev.PID, ev.Token
	tlG.addUnix(ev.At, holder.name, "acquired", fmt.Sprintf("acquired token %d (lease %s, renewed every %s)",
		ev.Token, seconds(crashTTL), seconds(crashTTL/3)), ev.Token)
	if ev, err = naiveHolder.Expect(ctx, "holding", 10*time.Second); err != nil {
		return nil, nil, err
	}
	un.HolderPID = ev.PID
	tlU.addUnix(ev.At, naiveHolder.name, "acquired", "inserted the lock row (no lease)", 0)

	if err := sleep(ctx, crashKillAfter); err != nil {
		return nil, nil, err
	}
	holder.Kill()
	naiveHolder.Kill()
	killed := time.Now()
	g.KilledAfterMS = ms(killed.Sub(held))
	tlG.add(killed, "demo", "killed", "SIGKILL "+holder.name+": it never unlocks", 0)
	tlU.add(killed, "demo", "killed", "SIGKILL "+naiveHolder.name+": it never unlocks", 0)

	locker := d.lockFor()
	g.ImmediateTry = "refused"
	lease, err := locker.Acquire(ctx, key, lock.WithWait(0), lock.WithTTL(crashTTL))
	tried := time.Now()
	switch {
	case err == nil:
		g.ImmediateTry = "acquired"
		tlG.add(tried, "instance 2", "acquired", "try: ACQUIRED while the dead holder's lease should run", lease.Token())
	case errors.Is(err, lock.ErrNotAcquired):
		tlG.add(tried, "instance 2", "refused", "try: refused, the dead holder's lease still runs", 0)
	}
	switch {
	case err == nil:
	case !errors.Is(err, lock.ErrNotAcquired):
		return nil, nil, err
	default:
		lease, err = locker.Acquire(ctx, key, lock.WithWait(crashTTL+crashGrace), lock.WithTTL(crashTTL))
		if err != nil && !errors.Is(err, lock.ErrNotAcquired) {
			return nil, nil, err
		}
	}
	if lease != nil {
		g.Acquired = true
		g.WaitedMS = ms(time.Since(killed))
		g.SuccessorToken = lease.Token()
		g.TokenHigher = lease.Token() > g.HolderToken
		if g.ImmediateTry == "refused" {
			tlG.add(time.Now(), "instance 2", "acquired", fmt.Sprintf("acquired token %d: the lease ran out", lease.Token()), lease.Token())
		}
		if err := lease.Release(ctx); err != nil {
			return nil, nil, err
		}
		tlG.add(time.Now(), "instance 2", "released", "released", 0)
	}
	g.Damaged = g.ImmediateTry != "refused" || !g.Acquired || !g.TokenHigher

	// By now the lease has run out; the lease-less lock has not.
	free, err := takeNaiveLock(ctx, d.data, naive, 0)
	if err != nil {
		return nil, nil, err
	}
	un.StillHeldMS = ms(time.Since(killed))
	un.ReleasedByTTL = free
	if free {
		tlU.add(time.Now(), "instance 2", "acquired", "inserted the lock row", 0)
	} else {
		tlU.add(time.Now(), "instance 2", "refused", "lock row still there: taken, and forever", 0)
	}
	un.StuckForever = !free
	un.Damaged = !free
	return un, g, nil
}

// holdRole takes the lock (mode "lease") or inserts a lease-less lock row
// (mode "unguarded"), says "holding", and keeps it, renewing, until killed:
// it never unlocks.
func holdRole(ctx context.Context, w *workerEnv, ready func(event)) error {
	ready(event{})
	if err := w.awaitGo(ctx); err != nil {
		return err
	}
	if w.c.mode == "unguarded" {
		ok, err := takeNaiveLock(ctx, w.data, w.c.row, os.Getpid())
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("naive lock already taken")
		}
		w.emit(event{Ev: "holding", PID: os.Getpid()})
	} else {
		lease, err := w.locker.Acquire(ctx, w.c.key, lock.WithTTL(w.c.ttl), lock.WithWait(0))
		if err != nil {
			return err
		}
		w.emit(event{Ev: "holding", PID: os.Getpid(), Token: lease.Token()})
	}
	<-ctx.Done()
	return nil
}
