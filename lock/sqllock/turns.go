package sqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkey-go/latchkey/internal/sqlconn"
	"github.com/latchkey-go/latchkey/internal/waitq"
)

// On MySQL, which has no NOTIFY, Lockers of different processes waiting for
// one key take turns through a named lock of the server (GET_LOCK), the
// key's turn. A Locker asks for the turn, on a connection of its own, once
// one of its waiting Acquire calls finds the key held by another Locker;
// the server grants the turn to one session at a time, in the order they
// asked. The statement that asks is the lease row's acquisition for the
// Locker's longest waiter, run once the server grants the turn (turnTake):
// a hand-over between processes is the holder's release, which gives the
// turn back inside its own statement (after the row is locked, before it
// commits), and the next in line's take, which waits on the row only until
// that commit, with no client between them. The waiter collects the lock
// without a round trip (collect); a lock taken for a waiter that gave up in
// the meantime is released on the turn's session.
//
// While the turn is asked for and not granted, the Locker's waiting calls
// make no attempt (turnValve excepted). If the take finds the lock held (a
// holder that took it without the turn, a paused one), the turn is held
// all the same and the Locker's waiting calls attempt, polling every few
// milliseconds while the holder has not let go; the one that takes the
// lock keeps the turn while it holds it. A release that hands the lock to
// the Locker's own next waiter (the row not marked as waited for) keeps the
// turn with the lock.
//
// Each statement waits for the turn a second at most (turnTake), and the
// session asks again, in the order the waits ran out: the statement holds
// the table's metadata lock while it waits, so a schema change of the table
// queues behind the line a second at most, not as long as the line lasts.
// A request given up ends when its statement does, never in the middle,
// where a take the client no longer hears of would keep the lock to its
// expiry.
//
// The server grants a named lock given back to its next waiter at once, so
// a release can tell whether someone stood in line (IS_USED_LOCK right
// after RELEASE_LOCK; without the turn, IS_USED_LOCK alone). If so, the
// releasing Locker's next attempts on the key, for up to turnValve or until
// its own turn comes, join the line instead of taking the lock back before
// the next in line wakes: a service that takes and releases a lock in a
// loop does not starve the others. A try (lock.WithWait(0)) of that
// Locker in that window fails as if the lock were held: the line comes
// first.
//
// The turn is only a hint about who attempts: the lease row alone decides
// who holds the lock, and a Locker that never gets the turn (its session
// lost, a holder of the turn paused) attempts once every turnValve anyway.
const (
	// turnValve bounds how long a waiting call goes without an attempt
	// while its Locker waits for the turn.
	turnValve = time.Second
	// turnTake is how many seconds one statement waits for the turn before
	// the session asks again (behind those that asked meanwhile). It bounds
	// how much of a lease taken in turn its wait costs: the server counts
	// the lease from when the statement began.
	turnTake = 1
	// turnShare and maxTurns bound the connections turns may take, counted
	// over every Locker on a pool: at most this part of a pool with
	// SetMaxOpenConns, and at most maxTurns (each is a session of the
	// server, whose max_connections every process shares). Waiters beyond
	// them poll, as without turns.
	turnShare = 2
	maxTurns  = 8
	// turnStatement bounds a turn's statement beyond its wait for the turn:
	// a row lock the take waits on, a release.
	turnStatement = 10 * time.Second
)

// turns keeps a Locker's turns on MySQL, and the wake-ups of its waiting
// Acquire calls: WatchReleaseFor registers one, TryAcquire decides whether
// it attempts and, after a failed attempt, when it attempts next.
type turns struct {
	db *sql.DB
	// take asks for the turn and takes the lock (queries' turnTake);
	// release and handover are the lock's, run on the connection that holds
	// the turn and giving the turn back as they free the lock (queries'
	// turnRelease and turnHandover).
	take, release, handover string
	prefix                  string // of the turns' names: the database's and the table's
	ctx                     context.Context
	cancel                  context.CancelFunc
	running                 sync.WaitGroup // goroutines asking for or giving back a turn

	mu      sync.Mutex
	gates   map[string]*gate      // by key; guarded by mu
	owners  map[string]*turnWatch // waiting Acquire calls by owner; guarded by mu
	refused string                // the owner whose last attempt found another Locker's holder; guarded by mu
	last    attempt               // the last refused attempt of a call not yet waiting; guarded by mu
	seq     uint64                // of waiting calls, in the order they began to wait; guarded by mu
	yielded deadlines             // keys this Locker released to a line, until turnValve after; guarded by mu
	open    *atomic.Int64         // turns asked for or held on db, by every Locker on it
	// idle is whether gates, owners and yielded are all empty, as of the
	// last unlock of mu: attempts and releases of a Locker nobody waits on
	// then take no lock.
	idle atomic.Bool
}

// unlock unlocks mu, recording whether t is idle.
func (t *turns) unlock() {
	t.idle.Store(len(t.gates) == 0 && len(t.owners) == 0 && len(t.yielded) == 0)
	t.mu.Unlock()
}

// poolTurns counts the turns asked for or held on each *sql.DB, which
// several Lockers may share.
var poolTurns sync.Map // *sql.DB -> *atomic.Int64

// A gate is a Locker's standing for one key.
type gate struct {
	key, name string
	watches   int       // waiting Acquire calls of the Locker
	holder    string    // the owner that took the lock while the turn was granted
	taken     *taken    // the lock the turn took, until a waiting call collects it
	turn      *turn     // asked for or held; nil when neither
	tried     time.Time // when the turn was asked for, or a call last attempted out of turn
}

// A turn is one request for a gate's turn.
type turn struct {
	conn *sql.Conn // the session the server granted the turn; nil until then
}

// taken is a lock a turn's session took for a waiting call.
type taken struct {
	owner string
	token int64
	sent  time.Time     // when the statement that took it was sent
	ttl   time.Duration // the lease asked for, from the statement's start
}

// An attempt is an owner's refused attempt: the lease it asked for.
type attempt struct {
	owner string
	ttl   time.Duration
}

// A turnWatch is a waiting Acquire call's wake-up and poll.
type turnWatch struct {
	key  string
	wake waitq.Wake
	poll *time.Timer
	n    int           // failed attempts in a row, for the poll's backoff
	seq  uint64        // when it began to wait, in the Locker's order
	ttl  time.Duration // the lease its attempts ask for; 0 until known
}

// newTurns returns the turns of a Locker on db whose turns' names start from
// prefix (the database and the table), with q's statements turnTake,
// turnRelease and turnHandover.
func newTurns(db *sql.DB, prefix string, q queries) *turns {
	ctx, cancel := context.WithCancel(context.Background())
	open, _ := poolTurns.LoadOrStore(db, new(atomic.Int64))
	t := &turns{db: db, open: open.(*atomic.Int64), take: q.turnTake, release: q.turnRelease, handover: q.turnHandover, prefix: prefix, ctx: ctx, cancel: cancel,
		gates: make(map[string]*gate), owners: make(map[string]*turnWatch)}
	t.idle.Store(true)
	return t
}

// turnName is the named lock of key's turn: at most 64 characters, as
// MySQL allows, distinct per database, table and key. t may be nil (a
// Locker made without turns): the name then matches nobody's turn.
func (t *turns) turnName(key string) string {
	if t == nil {
		return "latchkey:none"
	}
	h := sha256.Sum256([]byte(t.prefix + "\x00" + key))
	return "latchkey:" + hex.EncodeToString(h[:24])
}

// watch registers owner's waiting Acquire for key. If its last attempt
// found another Locker's holder, the Locker asks for key's turn.
func (t *turns) watch(key, owner string) (waitq.Wake, func()) {
	w := &turnWatch{key: key, wake: waitq.NewWake()}
	t.mu.Lock()
	defer t.unlock()
	t.seq++
	w.seq = t.seq
	if t.last.owner == owner {
		w.ttl, t.last = t.last.ttl, attempt{}
	}
	t.owners[owner] = w
	g := t.gates[key]
	if g == nil {
		g = &gate{key: key, name: t.turnName(key)}
		t.gates[key] = g
	}
	g.watches++
	if t.refused == owner {
		t.refused = ""
		t.askLocked(key, g)
	}
	return w.wake, func() { t.unwatch(key, owner, w) }
}

func (t *turns) unwatch(key, owner string, w *turnWatch) {
	t.mu.Lock()
	defer t.unlock()
	if w.poll != nil {
		w.poll.Stop()
	}
	if t.owners[owner] == w {
		delete(t.owners, owner)
	}
	if g := t.gates[key]; g != nil {
		g.watches--
		if g.taken != nil && g.taken.owner == owner {
			// It gave up as the turn took the lock for it.
			g.holder = ""
			t.letGoLocked(g)
		}
		t.tidyLocked(key, g)
	}
}

// tidyLocked gives key's turn back, or stops asking for it, once neither a
// waiting call nor a holder needs it, and forgets the gate; while waiting
// calls remain, it asks again for a turn given back.
func (t *turns) tidyLocked(key string, g *gate) {
	switch {
	case g.watches > 0 && g.holder == "":
		if g.turn == nil {
			t.askLocked(key, g)
		}
	case g.watches == 0 && g.holder == "":
		t.letGoLocked(g)
		delete(t.gates, key)
	}
}

// askLocked asks for key's turn on a connection of the Locker's, unless it
// asks or holds already, or turns have all the connections they may take.
func (t *turns) askLocked(key string, g *gate) {
	if g.turn != nil || t.ctx.Err() != nil {
		return
	}
	if t.open.Add(1) > t.limit() {
		t.open.Add(-1)
		return
	}
	tn := &turn{}
	g.turn, g.tried = tn, time.Now()
	t.running.Go(func() { t.ask(g, tn) })
}

// limit is how many turns the Lockers on t's pool may ask for or hold at once.
func (t *turns) limit() int64 {
	if n := t.db.Stats().MaxOpenConnections; n > 0 {
		return int64(min(n/turnShare, maxTurns))
	}
	return maxTurns
}

// ask asks for g's turn on a connection of its own, a second at a time,
// until the server grants it or the request is given up, taking the lock
// for the Locker's longest waiting call as the turn is granted.
func (t *turns) ask(g *gate, tn *turn) {
	conn, err := t.db.Conn(t.ctx)
	for err == nil {
		owner, ttl, asking := t.taker(g, tn)
		if !asking {
			t.giveBack(conn, g.name, false)
			return
		}
		var granted bool
		var token int64
		sent := time.Now()
		granted, token, err = t.ask1(conn, g, owner, ttl)
		if err == nil && granted {
			t.granted(g, tn, conn, taken{owner: owner, token: token, sent: sent, ttl: ttl})
			return
		}
	}
	if conn != nil {
		// The session failed, perhaps with the turn, or a lock taken: the
		// server frees both as the session ends.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}
	t.mu.Lock()
	defer t.unlock()
	if g.turn == tn { // the calls attempt as they would without turns
		g.turn = nil
		t.open.Add(-1)
		t.wakeLocked(g.key)
	}
}

// ask1 waits on conn for g's turn, at most turnTake seconds, and, if owner
// is not "", takes the lock for owner once the turn is granted: whether the
// turn was granted, and the token of the lock taken (0 if the lock was
// held). The statement is not cut short (see the turns' doc).
func (t *turns) ask1(conn *sql.Conn, g *gate, owner string, ttl time.Duration) (granted bool, token int64, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), turnTake*time.Second+turnStatement)
	defer cancel()
	if owner == "" {
		var got sql.NullInt64
		err = conn.QueryRowContext(ctx, "SELECT GET_LOCK('"+g.name+"',"+strconv.Itoa(turnTake)+")").Scan(&got)
		return got.Int64 == 1, 0, err
	}
	res, err := conn.ExecContext(ctx, inline(t.take, hexLiteral(g.key), hexLiteral(owner), strconv.FormatInt(ttl.Milliseconds(), 10), stringLiteral(g.name)))
	id, err := sqlconn.LastID(res, err)
	switch {
	case err != nil:
		return false, 0, err
	case id == 0: // not granted: the statement changed nothing
		return false, 0, nil
	case id < refusedFlag:
		return true, id, nil
	}
	return true, 0, nil // granted, the lock held
}

// taker returns the waiting call of g's key the turn takes the lock for: the
// longest waiting whose lease is known ("" if none), unless tn is no longer
// g's request.
func (t *turns) taker(g *gate, tn *turn) (owner string, ttl time.Duration, asking bool) {
	t.mu.Lock()
	defer t.unlock()
	if g.turn != tn || t.ctx.Err() != nil {
		return "", 0, false
	}
	var first *turnWatch
	for o, w := range t.owners {
		if w.key == g.key && w.ttl > 0 && (first == nil || w.seq < first.seq) {
			first, owner = w, o
		}
	}
	if first == nil {
		return "", 0, true
	}
	return owner, first.ttl, true
}

// granted records that conn holds g's turn, and the lock it took, if
// tk.token is not 0, for a call that collects it; a lock taken for a call
// that gave up, or a turn given up meanwhile, is given back.
func (t *turns) granted(g *gate, tn *turn, conn *sql.Conn, tk taken) {
	t.mu.Lock()
	defer t.unlock()
	if tk.token == 0 {
		tk.owner = ""
	}
	if g.turn != tn {
		t.running.Go(func() { t.drop(conn, g, tk.owner) })
		return
	}
	tn.conn = conn
	delete(t.yielded, g.key)
	if tk.owner == "" {
		t.wakeLocked(g.key)
		return
	}
	g.holder, g.taken = tk.owner, &tk
	if w := t.owners[tk.owner]; w != nil && w.key == g.key {
		w.wake.Signal()
		return
	}
	// Its call gave up meanwhile.
	g.holder = ""
	t.letGoLocked(g)
	t.tidyLocked(g.key, g)
}

// collect returns the lock key's turn took for a waiting call of the
// Locker, once: to owner, a waiting call that attempts, whether it was taken
// for owner or for another waiting call of the Locker (owner then relabels
// it). ok is false if there is none, or owner does not wait (a try of the
// Locker does not take a waiting call's lock).
func (t *turns) collect(key, owner string) (tk taken, ok bool) {
	if t == nil || t.idle.Load() {
		return taken{}, false
	}
	t.mu.Lock()
	defer t.unlock()
	g := t.gates[key]
	if w := t.owners[owner]; g == nil || g.taken == nil || w == nil || w.key != key {
		return taken{}, false
	}
	tk, g.taken, g.holder = *g.taken, nil, owner
	return tk, true
}

// uncollect forgets that owner holds the lock g's turn took for it, which
// owner found expired or no longer its own: the turn stays, and the
// Locker's waiting calls attempt.
func (t *turns) uncollect(key, owner string) {
	t.mu.Lock()
	defer t.unlock()
	if g := t.gates[key]; g != nil && g.holder == owner {
		g.holder = ""
		t.wakeLocked(key)
	}
}

// letGoLocked gives g's turn back, and the lock it took that no call
// collected, or stops asking for the turn (after the statement that asks).
func (t *turns) letGoLocked(g *gate) {
	tn := g.turn
	if tn == nil {
		return
	}
	g.turn = nil
	t.open.Add(-1)
	if tn.conn == nil {
		return
	}
	owner := ""
	if g.taken != nil {
		owner, g.taken = g.taken.owner, nil
	}
	t.running.Go(func() { t.drop(tn.conn, g, owner) })
}

// drop gives back the turn conn holds, releasing owner's lock on g's key if
// owner is not "", and returns conn to the pool.
func (t *turns) drop(conn *sql.Conn, g *gate, owner string) {
	if owner != "" {
		ctx, cancel := context.WithTimeout(context.Background(), turnStatement)
		n, err := sqlconn.Affected(conn.ExecContext(ctx, t.releaseStatement(g.name, g.key, owner)))
		cancel()
		if err == nil && n > 0 {
			t.giveBack(conn, g.name, false)
			return
		}
	}
	t.giveBack(conn, g.name, true)
}

// releaseStatement is the release of owner's lock on key on the session
// holding the key's turn, name, giving the turn back.
func (t *turns) releaseStatement(name, key, owner string) string {
	return inline(t.release, stringLiteral(name), stringLiteral(name), hexLiteral(key), hexLiteral(owner))
}

// giveBack gives back the turn conn holds, if unlock, and returns conn to
// the pool.
func (t *turns) giveBack(conn *sql.Conn, name string, unlock bool) {
	if unlock {
		ctx, cancel := context.WithTimeout(context.Background(), turnStatement)
		defer cancel()
		if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK('"+name+"')"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	_ = conn.Close()
}

// wakeLocked wakes key's waiting calls.
func (t *turns) wakeLocked(key string) {
	for _, w := range t.owners {
		if w.key == key {
			w.wake.Signal()
		}
	}
}

// outOfTurn reports whether owner, a waiting call for a lease of ttl, must
// not attempt key now because its Locker waits for the turn: the turn's
// grant wakes it, and the Manager's poll (at least once a second) asks
// again.
func (t *turns) outOfTurn(key, owner string, ttl time.Duration) bool {
	if t == nil || t.idle.Load() {
		return false
	}
	t.mu.Lock()
	defer t.unlock()
	if t.owners[owner] == nil {
		// Not (yet) a waiting call: its Locker just gave the lock to the
		// line, which it joins rather than barge in (watch asks for the
		// turn); a yield is forgotten once the Locker's turn comes or
		// after turnValve.
		if t.yielded.left(key) > 0 {
			t.refused, t.last = owner, attempt{owner: owner, ttl: ttl}
			return true
		}
		return false
	}
	g := t.gates[key]
	if g == nil || g.turn == nil || g.turn.conn != nil || time.Since(g.tried) >= turnValve {
		if g != nil {
			g.tried = time.Now()
		}
		return false
	}
	return true
}

// attempted records an attempt of owner on key for a lease of ttl: taken,
// or refused with the holder's time left, by another Locker's holder or
// not. A waiting call refused while its Locker holds the turn attempts
// again after a short backoff (2 to 10 ms), or right after the holder's
// lease ends.
func (t *turns) attempted(key, owner string, ttl time.Duration, taken, other bool, left time.Duration) {
	if t == nil || (t.idle.Load() && (taken || !other)) {
		return
	}
	t.mu.Lock()
	defer t.unlock()
	w, g := t.owners[owner], t.gates[key]
	if taken {
		if g != nil && g.turn != nil && g.turn.conn != nil && g.holder == "" {
			g.holder = owner
		}
		return
	}
	if w == nil {
		t.last = attempt{owner: owner, ttl: ttl} // for its watch
	} else {
		w.ttl = ttl
	}
	if other {
		if w == nil {
			t.refused = owner // a waiting call's first attempt: its watch asks
		} else if g != nil {
			t.askLocked(key, g)
		}
	}
	if w == nil || (g != nil && g.turn != nil && g.turn.conn == nil) {
		return // not waiting, or woken when the turn comes
	}
	d := min(2*time.Millisecond<<min(w.n, 3), 10*time.Millisecond)
	w.n++
	if left > 0 && left < d {
		d = left + time.Millisecond
	}
	if w.poll == nil {
		w.poll = time.AfterFunc(d, w.wake.Signal)
	} else {
		w.poll.Reset(d)
	}
}

// holding returns the connection holding key's turn if owner took the lock
// under it, for the release that gives the turn back; done must then be
// called with the lock's next owner if the release handed it over (the
// turn stays with it), else "", whether the statement gave the turn back,
// and whether the row was marked as waited for: other Lockers then stand
// in line, and this Locker's next attempts on key join the line too
// (outOfTurn) rather than take the lock from the next in line as it wakes.
func (t *turns) holding(key, owner string) (conn *sql.Conn, name string, done func(next string, givenBack, lineBehind bool)) {
	if t == nil || t.idle.Load() {
		return nil, "", nil
	}
	t.mu.Lock()
	defer t.unlock()
	g := t.gates[key]
	if g == nil || g.holder != owner || g.turn == nil || g.turn.conn == nil {
		return nil, "", nil
	}
	tn := g.turn
	return tn.conn, g.name, func(next string, givenBack, lineBehind bool) {
		t.mu.Lock()
		defer t.unlock()
		if g.turn != tn || g.holder != owner {
			return
		}
		if next != "" {
			g.holder = next
			return
		}
		if lineBehind {
			t.yieldLocked(key)
		}
		g.holder, g.turn = "", nil
		t.open.Add(-1)
		t.running.Go(func() { t.giveBack(tn.conn, g.name, !givenBack) })
		t.tidyLocked(key, g)
	}
}

// yieldLocked records that the Locker released key to a line, for
// turnValve.
func (t *turns) yieldLocked(key string) {
	t.yielded.set(key, time.Now().Add(turnValve))
}

// yield records that the Locker released key, not under a turn, while a
// session stood in line for its turn (see holding).
func (t *turns) yield(key string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.unlock()
	t.yieldLocked(key)
}

// lost gives key's turn back when owner, who held the lock under it, lost
// the lock.
func (t *turns) lost(key, owner string) {
	if t == nil || t.idle.Load() {
		return
	}
	t.mu.Lock()
	defer t.unlock()
	if g := t.gates[key]; g != nil && g.holder == owner {
		g.holder = ""
		t.letGoLocked(g)
		t.tidyLocked(key, g)
	}
}

// close gives every turn back and stops asking.
func (t *turns) close() {
	t.mu.Lock()
	t.cancel()
	for key, g := range t.gates {
		t.letGoLocked(g)
		delete(t.gates, key)
	}
	t.unlock()
	t.running.Wait()
}

// releaseTurn releases owner's lock on key, taken under key's turn, on conn,
// the session holding the turn, giving the turn back in the same statement.
func (b *backend) releaseTurn(ctx context.Context, conn *sql.Conn, name, key, owner string, done func(string, bool, bool)) error {
	n, line, err := sqlconn.AffectedAndID(conn.ExecContext(ctx, b.turns.releaseStatement(name, key, owner)))
	done("", err == nil && n > 0, line == inLine)
	switch {
	case err != nil:
		return fmt.Errorf("sqllock: %w", err)
	case n == 0:
		return errNotHeld
	}
	return nil
}

// handoverTurn is handoverMySQL for a lock taken under key's turn, on conn:
// the turn stays with the lock when it passes to next, and is given back
// when the lock is freed for everyone.
func (b *backend) handoverTurn(ctx context.Context, conn *sql.Conn, name, key, owner, next string, ttl time.Duration, done func(string, bool, bool)) (token, changed int64, err error) {
	stmt := inline(b.turns.handover, hexLiteral(next), stringLiteral(name), stringLiteral(name),
		strconv.FormatInt(ttl.Milliseconds(), 10), hexLiteral(key), hexLiteral(owner))
	changed, token, err = sqlconn.AffectedAndID(conn.ExecContext(ctx, stmt))
	switch {
	case err == nil && changed > 0 && token > inLine:
		done(next, false, false)
		return token, changed, nil
	case err == nil && changed > 0: // freed for everyone
		done("", true, token == inLine)
		return 0, changed, nil
	}
	done("", false, false)
	return 0, changed, err
}

// stringLiteral is s, made of letters, digits and colons only (a turn's
// name), as a MySQL string literal.
func stringLiteral(s string) string { return "'" + s + "'" }

// hexLiteral is s as a MySQL hex literal: any bytes, nothing to escape.
func hexLiteral(s string) string { return "X'" + hex.EncodeToString([]byte(s)) + "'" }

// inline replaces the statement's placeholders, in order, by literals.
func inline(stmt string, literals ...string) string {
	var b strings.Builder
	for _, lit := range literals {
		i := strings.IndexByte(stmt, '?')
		if i < 0 {
			break // fewer placeholders than literals: the server refuses what is left
		}
		b.WriteString(stmt[:i])
		b.WriteString(lit)
		stmt = stmt[i+1:]
	}
	b.WriteString(stmt)
	return b.String()
}
