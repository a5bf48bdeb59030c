package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// The seeds' third experiment, "forgot to unlock": a holder dies without
// releasing. Here it is a process killed with SIGKILL mid-lease. A lock
// without a lease stays taken forever; a lease runs out.
const (
	crashTTL = 1500 * time.Millisecond
	// crashKillAfter is how long the holder lives with the lock: past one
	// renewal (TTL/3), so the demo shows renewal stopping, not the first
	// lease running out.
	crashKillAfter = 700 * time.Millisecond
	// crashGrace is how long past the TTL the successor may wait before the
	// lock counts as stuck.
	crashGrace = 2 * time.Second
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
		Name:  "forgot-to-unlock",
		Title: fmt.Sprintf("Forgot to unlock: the holder is killed (SIGKILL) mid-lease; lease TTL %s", seconds(crashTTL)),
		Why:   "a dead process cannot renew its lease, so the lock frees itself after the TTL, never before",
		OK:    true,
	}
	began := time.Now()
	defer func() { s.DurationMS = ms(time.Since(began)) }()
	if !d.crossProcess() {
		s.Skipped = "the backend is in-process (mem://); its locks cannot reach other processes"
		s.say("skipped: %s", s.Skipped)
		return s
	}
	un, g, err := d.crashRun(ctx)
	if err != nil {
		return s.failed(err)
	}
	s.Unguarded, s.Guarded = un, g
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

func (d *demo) crashRun(ctx context.Context) (*crashUnguarded, *crashGuarded, error) {
	key, naive := d.key("job"), d.key("job")
	common := []string{"-role", "hold", "-db", d.dbPath, "-key", key, "-name", naive, "-ttl", crashTTL.String()}
	holder, err := startWorker(ctx, d.self, "lease holder", append(common, "-id", "1", "-backend", d.workerBackend())...)
	if err != nil {
		return nil, nil, err
	}
	defer holder.Kill()
	naiveHolder, err := startWorker(ctx, d.self, "lease-less holder", append(common, "-id", "2", "-unguarded")...)
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
	if ev, err = naiveHolder.Expect(ctx, "holding", 10*time.Second); err != nil {
		return nil, nil, err
	}
	un.HolderPID = ev.PID

	if err := sleep(ctx, crashKillAfter); err != nil {
		return nil, nil, err
	}
	holder.Kill()
	naiveHolder.Kill()
	killed := time.Now()
	g.KilledAfterMS = ms(killed.Sub(held))

	locker := d.lockFor()
	g.ImmediateTry = "refused"
	lease, err := locker.Acquire(ctx, key, lock.WithWait(0))
	switch {
	case err == nil:
		g.ImmediateTry = "acquired"
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
		if err := lease.Release(ctx); err != nil {
			return nil, nil, err
		}
	}
	g.Damaged = g.ImmediateTry != "refused" || !g.Acquired || !g.TokenHigher

	// By now the lease has run out; the lease-less lock has not.
	free, err := takeNaiveLock(ctx, d.data, naive, 0)
	if err != nil {
		return nil, nil, err
	}
	un.StillHeldMS = ms(time.Since(killed))
	un.ReleasedByTTL = free
	un.StuckForever = !free
	un.Damaged = !free
	return un, g, nil
}
