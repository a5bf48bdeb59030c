package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// workerCommand is the hidden command the demo starts its child processes
// with. A worker shares nothing with the demo but the lock backend, the data
// database and the idempotency store; it reports on stdout in JSON lines (see
// event) and takes orders on stdin, whose end also tells it the demo is gone.
const workerCommand = "demo-worker"

// Environment of a worker: where the locks, the data and the idempotency
// keys live. URLs may carry passwords, so they are not arguments.
const (
	envLocks = "LATCHKEY_DEMO_LOCKS"
	envData  = "LATCHKEY_DEMO_DATA"
	envStore = "LATCHKEY_DEMO_STORE"
)

type workerConfig struct {
	role    string // hold, transfer, writer, pay, consumer
	id      int
	name    string // what the worker is called in the timeline
	mode    string // unguarded, or the guard: lock, optimistic, fence, idem, dedup
	key     string // lock key
	row     string // the data row: account, naive-lock name, payment
	amount  int64
	hold    time.Duration // work between read and write
	ttl     time.Duration
	wait    time.Duration
	forge   bool // writer: sabotage, a token no lock issued
	step    bool // writer: wait for the demo's "write" between read and write
	private bool // pay: sabotage, instance-private books
	backend string
	data    string
	store   string
}

func workerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c workerConfig
	fs := flag.NewFlagSet(workerCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.role, "role", "", "hold, transfer, writer, pay or consumer")
	fs.IntVar(&c.id, "id", 0, "worker number")
	fs.StringVar(&c.name, "name", "", "name in the timeline")
	fs.StringVar(&c.mode, "mode", "unguarded", "unguarded or the guard in use")
	fs.StringVar(&c.key, "key", "", "lock key")
	fs.StringVar(&c.row, "row", "", "data row")
	fs.Int64Var(&c.amount, "amount", 0, "amount")
	fs.DurationVar(&c.hold, "hold", 0, "work between read and write")
	fs.DurationVar(&c.ttl, "ttl", 5*time.Second, "lease TTL")
	fs.DurationVar(&c.wait, "wait", 0, "how long to wait for the lock")
	fs.BoolVar(&c.forge, "forge", false, "write with a forged token")
	fs.BoolVar(&c.step, "step", false, "write when told to")
	fs.BoolVar(&c.private, "private", false, "keep instance-private books")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	c.backend, c.data, c.store = os.Getenv(envLocks), os.Getenv(envData), os.Getenv(envStore)
	out := &emitter{w: stdout}
	if err := runWorker(ctx, c, out, os.Stdin); err != nil {
		out.emit(event{Ev: "error", Worker: c.id, Msg: err.Error()})
		return exitFail
	}
	return exitOK
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

// A workerEnv is what a role runs with.
type workerEnv struct {
	c      workerConfig
	out    *emitter
	data   *dataDB
	locker lockurl.Locker // nil unless the role takes locks
	lines  <-chan string  // stdin after "go"
}

// order waits for the demo's next order, a line of n fields starting with
// verb, and returns its fields; none (and no error) once ctx is done.
func (w *workerEnv) order(ctx context.Context, verb string, n int) ([]string, error) {
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

func (w *workerEnv) emit(ev event) {
	ev.Worker = w.c.id
	w.out.emit(ev)
}

func runWorker(ctx context.Context, c workerConfig, out *emitter, stdin io.Reader) error {
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

	data, err := openData(ctx, c.data, 2)
	if err != nil {
		return err
	}
	defer data.Close()
	w := &workerEnv{c: c, out: out, data: data, lines: lines}
	if c.backend != "" && (c.role == "hold" && c.mode != "unguarded" || c.role == "transfer" ||
		c.role == "writer") {
		if w.locker, err = lockurl.Open(ctx, c.backend); err != nil {
			return err
		}
		defer w.locker.Close()
	}

	var role func(context.Context, *workerEnv, func(event)) error
	switch c.role {
	case "hold":
		role = holdRole
	case "transfer":
		role = transferRole
	case "writer":
		role = writerRole
	case "pay":
		role = payRole
	case "consumer":
		role = consumerRole
	default:
		return fmt.Errorf("unknown role %q", c.role)
	}
	// ready is the role's own: a server reports its address with it.
	ready := func(ev event) {
		ev.Ev, ev.PID = "ready", os.Getpid()
		w.emit(ev)
	}
	return role(ctx, w, ready)
}

// awaitGo waits for the demo's "go".
func (w *workerEnv) awaitGo(ctx context.Context) error {
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
