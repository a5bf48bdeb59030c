package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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
const scenarioTimeout = 30 * time.Second

// demo is one run of "latchkey demo": where its data and locks live.
type demo struct {
	backend string         // lock URL
	dbPath  string         // SQLite file with the demo's business data
	data    *sql.DB        // the demo's own connections to it
	locker  lockurl.Locker // the demo's own lock client
	runID   string         // names this run's keys and rows
	self    string         // this binary, to start workers from
	// sabotage gives every participant of a guarded run a private in-memory
	// lock, so nobody excludes anybody: the code path is the guarded one, the
	// lock is useless. It exists so the tests can prove the demo catches, and
	// exits non-zero on, damage in a guarded run, which otherwise never
	// happens. Hidden from the help.
	sabotage bool
}

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("json", false, "print the report as one JSON document")
	dbPath := fs.String("db", "", "SQLite file for the demo's data")
	backend := fs.String("backend", "", "lock backend URL")
	sabotage := fs.Bool("sabotage", false, "") // hidden: see demo.sabotage
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latchkey demo [--json] [--db FILE] [--backend URL]

Runs the seeds' experiments for real, with child processes sharing a SQLite
file, and explains what happened: two processes taking turns on one lock, a
holder killed mid-lease, 100 buyers for the last item. Each is shown without
the lock (the damage, counted) and with it. Exit status 1 if a run with the
lock shows damage, 130 if interrupted.

Flags:
  --json         print the report as one JSON document
  --db FILE      SQLite file for the demo's data (default: a new file in a
                 temporary directory, removed afterwards)
  --backend URL  where the locks live: sqlite:///path, postgres://user@host/db
                 or mem:// (default: sqlite on the --db file)
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "latchkey demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitUsage
	}

	d, cleanup, err := setUpDemo(ctx, *dbPath, *backend, *sabotage)
	defer cleanup()
	if err != nil {
		return fail(ctx, stderr, err)
	}
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

// setUpDemo prepares the data file and the lock client. cleanup undoes
// whatever was done, also after an error.
func setUpDemo(ctx context.Context, dbPath, backend string, sabotage bool) (_ *demo, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	d := &demo{sabotage: sabotage} // not the result: cleanup uses it after an error
	if d.self, err = selfPath(); err != nil {
		return nil, cleanup, err
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	d.runID = hex.EncodeToString(id[:])

	if dbPath == "" {
		dir, err := os.MkdirTemp("", "latchkey-demo-*")
		if err != nil {
			return nil, cleanup, err
		}
		undo = append(undo, func() { _ = os.RemoveAll(dir) })
		dbPath = filepath.Join(dir, "demo.db")
	}
	if d.dbPath, err = filepath.Abs(dbPath); err != nil {
		return nil, cleanup, err
	}
	d.backend = backend
	if d.backend == "" {
		d.backend = (&url.URL{Scheme: "sqlite", Path: filepath.ToSlash(d.dbPath)}).String()
	}
	data, err := openData(ctx, d.dbPath, stockBuyers)
	if err != nil {
		return nil, cleanup, err
	}
	d.data = data
	undo = append(undo, func() { _ = data.Close() })
	if err := createData(ctx, d.data); err != nil {
		return nil, cleanup, err
	}
	locker, err := lockurl.Open(ctx, d.backend)
	if err != nil {
		return nil, cleanup, err
	}
	d.locker = locker
	undo = append(undo, func() { _ = locker.Close() })
	return d, cleanup, nil
}

// key names a lock of this run.
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

// crossProcess reports whether the backend's locks are seen by other
// processes.
func (d *demo) crossProcess() bool { return !strings.HasPrefix(d.backend, "mem:") }

// run plays every scenario in turn. With progress non-nil, each scenario's
// text is written there as soon as it is done.
func (d *demo) run(ctx context.Context, progress io.Writer) (*report, error) {
	began := time.Now()
	rep := &report{Backend: lockurl.Redact(d.backend), DB: d.dbPath, OK: true, Sabotaged: d.sabotage}
	if progress != nil {
		writeHeader(progress, rep)
	}
	for i, sc := range []func(context.Context) *scenario{d.turns, d.crash, d.lastItem} {
		sctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
		s := sc(sctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err // interrupted: no report
		}
		rep.Scenarios = append(rep.Scenarios, s)
		rep.OK = rep.OK && s.OK
		if progress != nil {
			writeScenario(progress, i+1, s)
		}
	}
	rep.DurationMS = ms(time.Since(began))
	if progress != nil {
		writeFooter(progress, rep)
	}
	return rep, nil
}

func ms(d time.Duration) int64 { return d.Milliseconds() }
