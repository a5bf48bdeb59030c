package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
	"github.com/latchkey-go/latchkey/lock/memlock"
)

// scenarioTimeout bounds each scenario, so a wedged backend cannot hang the
// demo.
const scenarioTimeout = 60 * time.Second

// demo is one run of "latchkey demo": where its data, keys and locks live.
type demo struct {
	backend  string         // lock URL
	dataURL  string         // business data: sqlite:///path or postgres://
	storeURL string         // idempotency and dedup store: sqlStoreURL or redis://
	data     *dataDB        // the demo's own connections to the data
	locker   lockurl.Locker // the demo's own lock client
	runID    string         // names this run's keys and rows
	self     string         // this binary, to start workers from
	// sabotage breaks the guard of every guarded run while keeping its code
	// path: each participant gets a private lock or a private idempotency
	// store, and the paused holder's late write carries a forged token. It
	// exists so the tests can prove the demo catches, and exits non-zero on,
	// damage in a guarded run, which otherwise never happens. Hidden from
	// the help.
	sabotage bool
	only     []string // scenarios to run; all when empty
}

// scenarioNames are the scenarios in the order they run.
var scenarioNames = []string{"payment", "failed-handler", "transfers", "last-item", "paused-holder", "forgot-to-unlock"}

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	jsonOut := fs.Bool("json", false, "print the report as one JSON document")
	db := fs.String("db", "", "where the data and the idempotency keys live")
	backend := fs.String("backend", "", "lock backend URL")
	only := fs.String("only", "", "run only these scenarios")
	sabotage := fs.Bool("sabotage", false, "") // hidden: see demo.sabotage
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latchkey demo [--json] [--db URL] [--backend URL] [--only NAMES]

Runs the classic duplicate failures for real, with child processes on
loopback, and shows each one without its guard (the damage, counted) and with
it (none):

  1. one payment arriving 3 times in 200 ms at two instances, then once more
     from a queue                            guard: Idempotency-Key + unique ledger
  2. a message handler that fails after claiming the message    guard: dedup
  3. two concurrent transfers into one account      guard: lock; version column
  4. 100 buyers for the last item                                guard: lock
  5. a holder paused past its lease writes late        guard: fencing token
  6. a holder killed without unlocking                       guard: lease TTL

Each scenario prints a timeline of who held what and which write was
refused. Exit status 1 if a guarded run shows damage, 130 if interrupted.

Flags:
  --json         print the report, timelines included, as one JSON document
  --db URL       the business data and the idempotency/dedup keys (1, 2):
                 a SQLite file (path or sqlite:///path), postgres://..., or
                 redis://... (keys in Redis, data in a temporary SQLite file).
                 Default: a new SQLite file in a temporary directory, removed
                 afterwards.
  --backend URL  the locks (3-6): sqlite:///path, postgres://, redis://,
                 redlock://, etcd://, zk:// or mem:// (one process only: the
                 scenarios with child processes are skipped). Default: the
                 --db database (SQLite or PostgreSQL), or Redis for redis://.
  --only NAMES   run only these scenarios, comma-separated: payment,
                 failed-handler, transfers, last-item, paused-holder,
                 forgot-to-unlock
`)
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "latchkey demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}

	var names []string
	if *only != "" {
		for _, n := range strings.Split(*only, ",") {
			if !slices.Contains(scenarioNames, n) {
				fmt.Fprintf(stderr, "latchkey demo: --only: no scenario %q (there are: %s)\n", n, strings.Join(scenarioNames, ", "))
				return exitUsage
			}
			names = append(names, n)
		}
	}
	d, cleanup, err := setUpDemo(ctx, *db, *backend, *sabotage)
	defer cleanup()
	if err != nil {
		return fail(ctx, stderr, err)
	}
	d.only = names
	var progress io.Writer
	if !*jsonOut {
		progress = stdout
	}
	rep, err := d.run(ctx, progress)
	if err != nil {
		return fail(ctx, stderr, err)
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fail(ctx, stderr, err)
		}
	}
	if !rep.OK {
		return exitFail
	}
	return exitOK
}

func fail(ctx context.Context, stderr io.Writer, err error) int {
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "latchkey demo: interrupted; workers stopped, temporary files removed")
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "latchkey demo: %v\n", err)
	return exitFail
}

// setUpDemo prepares the data, the stores and the lock client. cleanup undoes
// whatever was done, also after an error.
func setUpDemo(ctx context.Context, db, backend string, sabotage bool) (_ *demo, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	d := &demo{sabotage: sabotage, storeURL: sqlStoreURL} // not the result: cleanup uses it after an error
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
	if err := createData(ctx, d.data, !isRedis); err != nil {
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

// start starts a worker process named name.
func (d *demo) start(ctx context.Context, name, locks string, args ...string) (*proc, error) {
	return startWorker(ctx, d.self, name, d.env(locks), append([]string{"-name", name}, args...)...)
}

// crossProcess reports whether the backend's locks are seen by other
// processes.
func (d *demo) crossProcess() bool { return !strings.HasPrefix(d.backend, "mem:") }

// skipInProcess marks s skipped when the locks cannot reach other processes.
func (d *demo) skipInProcess(s *scenario) bool {
	if d.crossProcess() {
		return false
	}
	s.Skipped = "the backend is in-process (mem://); its locks cannot reach other processes"
	s.say("skipped: %s", s.Skipped)
	return true
}

// run plays every scenario in turn. With progress non-nil, each scenario's
// text is written there as soon as it is done.
func (d *demo) run(ctx context.Context, progress io.Writer) (*report, error) {
	began := time.Now()
	store := "the data database's tables"
	if d.storeURL != sqlStoreURL {
		store = lockurl.Redact(d.storeURL)
	}
	rep := &report{Backend: lockurl.Redact(d.backend), DB: lockurl.Redact(d.dataURL), Store: store,
		OK: true, Sabotaged: d.sabotage}
	if progress != nil {
		writeHeader(progress, rep)
	}
	all := []func(context.Context) *scenario{d.payment, d.message, d.transfers, d.lastItem, d.paused, d.crash}
	for i, sc := range all {
		if len(d.only) > 0 && !slices.Contains(d.only, scenarioNames[i]) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
		began := time.Now()
		s := sc(sctx)
		s.DurationMS = ms(time.Since(began))
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err // interrupted: no report
		}
		rep.Scenarios = append(rep.Scenarios, s)
		rep.OK = rep.OK && s.OK
		if progress != nil {
			writeScenario(progress, len(rep.Scenarios), s)
		}
	}
	rep.DurationMS = ms(time.Since(began))
	if progress != nil {
		writeFooter(progress, rep)
	}
	return rep, nil
}

// wantReady waits for every worker's "ready".
func wantReady(ctx context.Context, procs ...*proc) ([]event, error) {
	evs := make([]event, len(procs))
	for i, p := range procs {
		ev, err := p.Expect(ctx, "ready", workerStartTimeout)
		if err != nil {
			return nil, err
		}
		evs[i] = ev
	}
	return evs, nil
}

// pgConns is how many connections the demo opens to a PostgreSQL server.
const pgConns = 20

// workerStartTimeout bounds a worker's start, generous for a loaded machine.
const workerStartTimeout = 20 * time.Second

func ms(d time.Duration) int64 { return d.Milliseconds() }
