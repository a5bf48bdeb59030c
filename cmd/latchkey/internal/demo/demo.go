// Package demo is "latchkey demo": the classic duplicate failures, each
// played for real without its guard and with it, and the report of what
// each run damaged. Every scenario is one file that registers itself (see
// scenario); the demo's child processes are this program again, started as
// WorkerCommand, playing a scenario's role.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// scenarioTimeout bounds each scenario, so a wedged backend cannot hang the
// demo.
const scenarioTimeout = 60 * time.Second

// Options say where a demo keeps its data, keys and locks, and what it
// plays. The zero Options play every scenario on a new SQLite file in a
// temporary directory, locks included.
type Options struct {
	// DB holds the business data and the idempotency and dedup keys: a
	// SQLite file (a path or sqlite:///path), postgres://, mysql://, or redis://
	// (keys in Redis, data in a temporary SQLite file). Default: a new
	// SQLite file in a temporary directory, removed afterwards.
	DB string
	// Backend is the locks' URL (see lock/lockurl). Default: the DB
	// database, or Redis for a redis:// DB.
	Backend string
	// Only names the scenarios to play (they play in the demo's order).
	// Default: all of them.
	Only []string
	// Sabotage breaks the guard of every guarded run while keeping its code
	// path: each participant gets a private lock or a private idempotency
	// store, and the paused holder's late write carries a forged token. It
	// exists so the tests can prove the demo catches, and exits non-zero on,
	// damage in a guarded run, which otherwise never happens. Default: off.
	Sabotage bool
}

// Run plays the demo and returns its report. With progress non-nil, the text
// report is written there as each scenario ends. Before it returns it stops
// its workers and removes what it created in temporary directories. A name
// in o.Only that no scenario has is an error wrapping ErrUnknownScenario,
// and nothing is set up; when ctx ends, Run returns its error and no
// report; other errors are failures to set up the data, the stores or the
// locks. A guarded run's damage is no error: it is in the report
// (Report.OK false).
func Run(ctx context.Context, o Options, progress io.Writer) (*Report, error) {
	plays, err := choose(o.Only)
	if err != nil {
		return nil, err
	}
	d, cleanup, err := setUp(ctx, o, plays)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	return d.run(ctx, progress)
}

// demo is one run of "latchkey demo": where its data, keys and locks live.
type demo struct {
	backend  string         // lock URL
	dataURL  string         // business data: sqlite:///path, postgres:// or mysql://
	storeURL string         // idempotency and dedup store: sqlStoreURL or redis://
	data     *dataDB        // the demo's own connections to the data
	locker   lockurl.Locker // the demo's own lock client
	runID    string         // names this run's keys and rows
	self     string         // this binary, to start workers from
	sabotage bool           // see Options.Sabotage
	plays    []*scenario    // what it plays, in order
}

// setUp prepares the data of the scenarios it plays, the stores and the
// lock client. cleanup undoes whatever was done, also after an error.
func setUp(ctx context.Context, o Options, plays []*scenario) (_ *demo, cleanup func(), err error) {
	db, backend := o.DB, o.Backend
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	d := &demo{sabotage: o.Sabotage, storeURL: sqlStoreURL, plays: plays} // not the result: cleanup uses it after an error
	if d.self, err = selfPath(); err != nil {
		return nil, cleanup, err
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	d.runID = hex.EncodeToString(id[:])

	dataURL, isRedis, err := parseDataURL(db)
	if err != nil {
		return nil, cleanup, err
	}
	if isRedis {
		d.storeURL = db
	}
	if db == "" || isRedis {
		dir, err := os.MkdirTemp("", "latchkey-demo-*")
		if err != nil {
			return nil, cleanup, err
		}
		undo = append(undo, func() { _ = os.RemoveAll(dir) })
		if dataURL, _, err = sqliteDataURL(filepath.Join(dir, "demo.db")); err != nil {
			return nil, cleanup, err
		}
	}
	d.dataURL = dataURL
	d.backend = backend
	if d.backend == "" {
		d.backend = dataURL
		if isRedis {
			d.backend = db
		}
	}
	d.backend = shortSessions(d.backend)
	conns := stockWorkers // every request worker its own connection
	if sqlitePathOf(d.dataURL) == "" {
		conns = pgConns // a server's connections are shared with others
	}
	data, err := openData(ctx, d.dataURL, conns)
	if err != nil {
		return nil, cleanup, err
	}
	d.data = data
	undo = append(undo, func() { _ = data.Close() })
	if err := createData(ctx, d.data, tablesOf(plays), !isRedis); err != nil {
		return nil, cleanup, err
	}
	if isRedis { // fail early, with a clear error, if Redis is not there
		st, err := openStores(ctx, d.storeURL, d.data)
		if err != nil {
			return nil, cleanup, err
		}
		_ = st.close()
	}
	locker, err := lockurl.Open(ctx, d.backend)
	if err != nil {
		return nil, cleanup, err
	}
	d.locker = locker
	undo = append(undo, func() { _ = locker.Close() })
	return d, cleanup, nil
}

// demoSession is the ZooKeeper session timeout the demo asks for unless the
// URL names one: a ZooKeeper lock lives as long as its holder's session, and
// the demo's dead and frozen holders should lose theirs within seconds. On
// ZooKeeper every lease of the demo is at most this long (see ttl).
const demoSession = 3 * time.Second

// ttl is the lease a scenario asks for, want, within what the backend
// accepts: zklock refuses a TTL longer than its session.
func (d *demo) ttl(want time.Duration) time.Duration {
	if strings.HasPrefix(d.backend, "zk://") {
		return min(want, demoSession)
	}
	return want
}

// shortSessions adds session=1.5s to a zk:// URL that has no session.
func shortSessions(backend string) string {
	if !strings.HasPrefix(backend, "zk://") {
		return backend
	}
	u, err := url.Parse(backend)
	if err != nil || u.Query().Has("session") {
		return backend // lockurl.Open reports a bad URL
	}
	q := u.Query()
	q.Set("session", demoSession.String())
	u.RawQuery = q.Encode()
	return u.String()
}

// key names a lock, a row or an idempotency key of this run.
func (d *demo) key(name string) string { return "latchkey-demo/" + d.runID + "/" + name }

// lockFor returns the lock client of one participant of a guarded run in
// this process.
func (d *demo) lockFor() lock.Locker {
	if d.sabotage {
		return memlock.New()
	}
	return d.locker
}

// workerBackend is the lock URL workers of a guarded run open.
func (d *demo) workerBackend() string {
	if d.sabotage {
		return "mem://"
	}
	return d.backend
}

// workerStore is the idempotency store workers of a guarded run open.
func (d *demo) workerStore() string {
	if d.sabotage {
		return "mem://"
	}
	return d.storeURL
}

// env is a worker's environment, with the lock URL it is to use.
func (d *demo) env(locks string) []string {
	return []string{envLocks + "=" + locks, envData + "=" + d.dataURL, envStore + "=" + d.workerStore()}
}

// A part is one worker to start: what the timeline calls it, the role it
// plays with its parameters (sent as JSON), and the lock URL it opens.
type part struct {
	name   string
	role   *role
	params any
	locks  string // "": none
}

// start starts a worker playing p.
func (d *demo) start(ctx context.Context, p part) (*proc, error) {
	params, err := json.Marshal(p.params)
	if err != nil {
		return nil, err
	}
	return startWorker(ctx, d.self, p.name, d.env(p.locks), "-role", p.role.id(), "-name", p.name, "-params", string(params))
}

// cast starts a worker for each part, all at once, and waits until each is
// ready (its ready event is in proc.ready). The caller kills them; on an
// error they are killed already.
func (d *demo) cast(ctx context.Context, parts ...part) (group, error) {
	var g group
	for _, p := range parts {
		pr, err := d.start(ctx, p)
		if err != nil {
			g.kill()
			return nil, err
		}
		g = append(g, pr)
	}
	for _, pr := range g {
		ev, err := pr.Expect(ctx, kindReady, workerStartTimeout)
		if err != nil {
			g.kill()
			return nil, err
		}
		pr.ready = ev
	}
	return g, nil
}

// A group is the workers of a scenario.
type group []*proc

func (g group) kill() {
	for _, p := range g {
		p.Kill()
	}
}

// crossProcess reports whether the backend's locks are seen by other
// processes.
func (d *demo) crossProcess() bool { return !strings.HasPrefix(d.backend, "mem:") }

// run plays every scenario in turn. With progress non-nil, each scenario's
// text is written there as soon as it is done.
func (d *demo) run(ctx context.Context, progress io.Writer) (*Report, error) {
	began := time.Now()
	store := "the data database's tables"
	if d.storeURL != sqlStoreURL {
		store = lockurl.Redact(d.storeURL)
	}
	rep := &Report{Backend: lockurl.Redact(d.backend), DB: lockurl.Redact(d.dataURL), Store: store,
		OK: true, Sabotaged: d.sabotage}
	if progress != nil {
		writeHeader(progress, rep)
	}
	for _, sc := range d.plays {
		sctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
		began := time.Now()
		r := d.play(sctx, sc)
		r.DurationMS = ms(time.Since(began))
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err // interrupted: no report
		}
		rep.Scenarios = append(rep.Scenarios, r)
		rep.OK = rep.OK && r.OK
		if progress != nil {
			writeScenario(progress, len(rep.Scenarios), r)
		}
	}
	rep.DurationMS = ms(time.Since(began))
	if progress != nil {
		writeFooter(progress, rep)
	}
	return rep, nil
}

// play plays one scenario and returns what it showed.
func (d *demo) play(ctx context.Context, sc *scenario) *Result {
	r := &Result{Name: sc.name, Title: sc.title, Guard: sc.guard, Why: sc.why, Damage: damage{Unit: sc.unit}, OK: true}
	if sc.crossProcess && !d.crossProcess() {
		r.skip("the backend is in-process (mem://); its locks cannot reach other processes")
		return r
	}
	if err := sc.play(ctx, d, r); err != nil {
		r.failed(err)
	}
	return r
}

// pgConns is how many connections the demo opens to a PostgreSQL server.
const pgConns = 20

// workerStartTimeout bounds a worker's start, generous for a loaded machine.
const workerStartTimeout = 20 * time.Second

func ms(d time.Duration) int64 { return d.Milliseconds() }
