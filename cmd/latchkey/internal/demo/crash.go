package demo

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

func init() {
	register(&scenario{
		order:     6,
		name:      "forgot-to-unlock",
		title:     fmt.Sprintf("Forgot to unlock: the holder is killed (SIGKILL) mid-lease; lease TTL %s", seconds(crashTTL)),
		menu:      "a holder killed without unlocking",
		menuGuard: "lease TTL",
		guard:     "a lease: renewed while its holder lives, expiring after the TTL when it dies",
		why:       "a dead process cannot renew its lease, so the lock frees itself after the TTL, never before",
		unit:      "locks stuck forever or taken too early",
		// A lock without a lease, where "forgot to unlock" starts: a row
		// that only its holder deletes.
		tables:       []string{`CREATE TABLE IF NOT EXISTS demo_naive_locks (name {key} PRIMARY KEY, holder BIGINT NOT NULL)`},
		crossProcess: true,
		roles:        []*role{holdRole},
		play:         playCrash,
	})
}

// holdRole is a holder that never unlocks.
var holdRole = roleOf("hold", hold)

// holdParams are a holder's.
type holdParams struct {
	Lease bool   // a lease on Key; otherwise the lease-less lock row Row
	Key   string // the lock's
	Row   string // the lock row's name
	TTL   time.Duration
}

func playCrash(ctx context.Context, d *demo, s *Result) error {
	tlU, tlG := newTimeline(), newTimeline()
	un, g, err := d.crashRun(ctx, tlU, tlG)
	if err != nil {
		return err
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
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (d *demo) crashRun(ctx context.Context, tlU, tlG *timeline) (*crashUnguarded, *crashGuarded, error) {
	key, naive := d.key("job"), d.key("job")
	workers, err := d.cast(ctx,
		part{name: "instance 1", role: holdRole, locks: d.workerBackend(),
			params: holdParams{Lease: true, Key: key, TTL: crashTTL}},
		part{name: "instance 1", role: holdRole, params: holdParams{Row: naive}})
	if err != nil {
		return nil, nil, err
	}
	defer workers.kill()
	holder, naiveHolder := workers[0], workers[1]
	g := &crashGuarded{TTLMS: ms(crashTTL)}
	un := &crashUnguarded{}
	for _, p := range workers {
		if err := p.Go(); err != nil {
			return nil, nil, err
		}
	}
	ev, err := holder.Expect(ctx, kindAcquired, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	held := time.Now()
	g.HolderPID, g.HolderToken = ev.PID, ev.Token
	tlG.event(holder.name, ev, fmt.Sprintf("acquired token %d (lease %s, renewed every %s)",
		ev.Token, seconds(crashTTL), seconds(crashTTL/3)))
	if ev, err = naiveHolder.Expect(ctx, kindAcquired, 10*time.Second); err != nil {
		return nil, nil, err
	}
	un.HolderPID = ev.PID
	tlU.event(naiveHolder.name, ev, "inserted the lock row (no lease)")

	if err := sleep(ctx, crashKillAfter); err != nil {
		return nil, nil, err
	}
	holder.Kill()
	naiveHolder.Kill()
	killed := time.Now()
	g.KilledAfterMS = ms(killed.Sub(held))
	tlG.signal(killed, kindKilled, holder.name, "SIGKILL "+holder.name+": it never unlocks")
	tlU.signal(killed, kindKilled, naiveHolder.name, "SIGKILL "+naiveHolder.name+": it never unlocks")

	locker := d.lockFor()
	g.ImmediateTry = "refused"
	lease, err := locker.Acquire(ctx, key, lock.WithWait(0), lock.WithTTL(crashTTL))
	tried := time.Now()
	switch {
	case err == nil:
		g.ImmediateTry = "acquired"
		tlG.add(tried, "instance 2", kindAcquired, "try: ACQUIRED while the dead holder's lease should run", lease.Token())
	case errors.Is(err, lock.ErrNotAcquired):
		tlG.add(tried, "instance 2", kindRefused, "try: refused, the dead holder's lease still runs", 0)
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
			tlG.add(time.Now(), "instance 2", kindAcquired, fmt.Sprintf("acquired token %d: the lease ran out", lease.Token()), lease.Token())
		}
		if err := lease.Release(ctx); err != nil {
			return nil, nil, err
		}
		tlG.add(time.Now(), "instance 2", kindReleased, "released", 0)
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
		tlU.add(time.Now(), "instance 2", kindAcquired, "inserted the lock row", 0)
	} else {
		tlU.add(time.Now(), "instance 2", kindRefused, "lock row still there: taken, and forever", 0)
	}
	un.StuckForever = !free
	un.Damaged = !free
	return un, g, nil
}

// takeNaiveLock inserts the lease-less lock row; false if someone has it.
func takeNaiveLock(ctx context.Context, db *dataDB, name string, holder int) (bool, error) {
	res, err := db.exec(ctx, `INSERT INTO demo_naive_locks (name, holder) VALUES ($1, $2) `+db.dialect.DoNothing("name"), name, holder)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// hold takes the lock (a lease) or inserts a lease-less lock row, says it
// has it, and keeps it, renewing, until killed: it never unlocks.
func hold(ctx context.Context, w *worker, p holdParams) error {
	var locker lock.Locker
	if p.Lease {
		var err error
		if locker, err = w.locks(ctx); err != nil {
			return err
		}
	}
	w.ready(event{})
	if err := w.awaitGo(ctx); err != nil {
		return err
	}
	if !p.Lease {
		ok, err := takeNaiveLock(ctx, w.data, p.Row, os.Getpid())
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("naive lock already taken")
		}
		w.emit(event{Kind: kindAcquired, PID: os.Getpid()})
	} else {
		lease, err := locker.Acquire(ctx, p.Key, lock.WithTTL(p.TTL), lock.WithWait(0))
		if err != nil {
			return err
		}
		w.emit(event{Kind: kindAcquired, PID: os.Getpid(), Token: lease.Token()})
	}
	<-ctx.Done()
	return nil
}
