package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// WorkerCommand is the hidden command the demo starts its child processes
// with. A worker shares nothing with the demo but the lock backend, the data
// database and the idempotency store; it reports on stdout in JSON lines (see
// event) and takes orders on stdin, whose end also tells it the demo is gone.
const WorkerCommand = "demo-worker"

// Environment of a worker: where the locks, the data and the idempotency
// keys live. URLs may carry passwords, so they are not arguments.
const (
	envLocks = "LATCHKEY_DEMO_LOCKS"
	envData  = "LATCHKEY_DEMO_DATA"
	envStore = "LATCHKEY_DEMO_STORE"
)

// ErrWorkerUsage is returned by Worker, wrapped, for arguments it cannot
// parse; the flag package has said what is wrong on stderr.
var ErrWorkerUsage = errors.New("demo-worker: bad arguments")

// Worker is the worker command: it plays the role its -role names (a
// scenario's, found in the registry), with the -params given, until the
// role is done, stdin ends or ctx is done. A failure is reported on stdout
// as an error event, for the demo to show, and returned.
func Worker(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(WorkerCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("role", "", "scenario/role")
	name := fs.String("name", "", "name in the timeline")
	params := fs.String("params", "{}", "the role's parameters, JSON")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", ErrWorkerUsage, err)
	}
	out := &emitter{w: stdout}
	w := &worker{name: *name, out: out, locksURL: os.Getenv(envLocks), storeURL: os.Getenv(envStore)}
	err := w.play(ctx, *id, json.RawMessage(*params), os.Getenv(envData), stdin)
	if err != nil {
		out.emit(event{Kind: kindError, Msg: err.Error()})
	}
	return err
}

type emitter struct {
	mu sync.Mutex
	w  io.Writer
}

func (e *emitter) emit(ev event) {
	if ev.At == 0 {
		ev.At = time.Now().UnixNano()
	}
	b, _ := json.Marshal(ev) // plain struct: cannot fail
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}

// A worker is what a role runs with.
type worker struct {
	name     string // in the timeline
	out      *emitter
	data     *dataDB
	locksURL string
	storeURL string
	locker   lockurl.Locker // opened by locks
	lines    <-chan string  // orders from stdin
}

// play opens the data and plays the role id names.
func (w *worker) play(ctx context.Context, id string, params json.RawMessage, dataURL string, stdin io.Reader) error {
	r, err := findRole(id)
	if err != nil {
		return err
	}
	// The demo closing our stdin (or dying) ends us.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		cancel()
	}()
	w.lines = lines
	if w.data, err = openData(ctx, dataURL, 2); err != nil {
		return err
	}
	defer w.data.Close()
	defer func() {
		if w.locker != nil {
			_ = w.locker.Close()
		}
	}()
	return r.run(ctx, w, params)
}

// locks returns the worker's lock client, opened on first use.
func (w *worker) locks(ctx context.Context) (lockurl.Locker, error) {
	if w.locker == nil {
		l, err := lockurl.Open(ctx, w.locksURL)
		if err != nil {
			return nil, err
		}
		w.locker = l
	}
	return w.locker, nil
}

// stores opens the idempotency and dedup stores; the caller closes them.
func (w *worker) stores(ctx context.Context) (*stores, error) {
	return openStores(ctx, w.storeURL, w.data)
}

func (w *worker) emit(ev event) { w.out.emit(ev) }

// ready says the worker is ready for orders; ev may carry what the role
// has to say with it (a server's address).
func (w *worker) ready(ev event) {
	ev.Kind, ev.PID = kindReady, os.Getpid()
	w.emit(ev)
}

// order waits for the demo's next order, a line of n fields starting with
// verb, and returns its fields; none (and no error) once ctx is done.
func (w *worker) order(ctx context.Context, verb string, n int) ([]string, error) {
	select {
	case line := <-w.lines:
		f := strings.Fields(line)
		if len(f) != n || f[0] != verb {
			return nil, fmt.Errorf("unexpected order %q", line)
		}
		return f, nil
	case <-ctx.Done():
		return nil, nil
	}
}

// awaitGo waits for the demo's "go".
func (w *worker) awaitGo(ctx context.Context) error {
	select {
	case <-w.lines:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
