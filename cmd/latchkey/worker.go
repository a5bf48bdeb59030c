package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// workerCommand is the hidden command the demo starts its child processes
// with. A worker shares nothing with the demo but the lock backend and the
// SQLite file; it reports on stdout in JSON lines (see event) and waits on
// stdin, which also tells it when the demo is gone.
const workerCommand = "demo-worker"

type workerConfig struct {
	role      string // "turns" or "hold"
	id        int
	backend   string
	db        string
	key       string // lock key
	name      string // counter or naive-lock row
	rounds    int
	hold      time.Duration
	pause     time.Duration
	ttl       time.Duration
	unguarded bool
}

func workerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c workerConfig
	fs := flag.NewFlagSet(workerCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.role, "role", "", "turns or hold")
	fs.IntVar(&c.id, "id", 0, "worker number")
	fs.StringVar(&c.backend, "backend", "", "lock URL")
	fs.StringVar(&c.db, "db", "", "SQLite data file")
	fs.StringVar(&c.key, "key", "", "lock key")
	fs.StringVar(&c.name, "name", "", "data row")
	fs.IntVar(&c.rounds, "rounds", 1, "increments (turns)")
	fs.DurationVar(&c.hold, "hold", 0, "time between read and write (turns)")
	fs.DurationVar(&c.pause, "pause", 0, "time between rounds (turns)")
	fs.DurationVar(&c.ttl, "ttl", 5*time.Second, "lease TTL")
	fs.BoolVar(&c.unguarded, "unguarded", false, "no lock (turns) or a lease-less lock row (hold)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
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
	b, _ := json.Marshal(ev) // plain struct: cannot fail
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
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

	data, err := openData(ctx, c.db, 1)
	if err != nil {
		return err
	}
	defer data.Close()
	var locker lockurl.Locker
	if !c.unguarded {
		if locker, err = lockurl.Open(ctx, c.backend); err != nil {
			return err
		}
		defer locker.Close()
	}

	out.emit(event{Ev: "ready", Worker: c.id, PID: os.Getpid()})
	select {
	case <-lines:
	case <-ctx.Done():
		return ctx.Err()
	}

	switch c.role {
	case "turns":
		for r := 1; r <= c.rounds; r++ {
			if err := turn(ctx, c, r, locker, data, out); err != nil {
				return err
			}
			if err := sleep(ctx, c.pause); err != nil {
				return err
			}
		}
		out.emit(event{Ev: "done", Worker: c.id})
		return nil
	case "hold":
		if c.unguarded {
			ok, err := takeNaiveLock(ctx, data, c.name, os.Getpid())
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("naive lock already taken")
			}
			out.emit(event{Ev: "holding", Worker: c.id, PID: os.Getpid()})
		} else {
			lease, err := locker.Acquire(ctx, c.key, lock.WithTTL(c.ttl), lock.WithWait(0))
			if err != nil {
				return err
			}
			out.emit(event{Ev: "holding", Worker: c.id, PID: os.Getpid(), Token: lease.Token()})
		}
		<-ctx.Done() // hold, renewing, until killed: never unlock
		return nil
	}
	return fmt.Errorf("unknown role %q", c.role)
}

// turn is one read-modify-write of the shared counter, under the lock unless
// unguarded. The pause between read and write is the work a real service
// does there (a price check, a call out); it is what lets two unguarded
// writers read the same value.
func turn(ctx context.Context, c workerConfig, round int, locker lock.Locker, data *sql.DB, out *emitter) error {
	body := func(ctx context.Context, token uint64) error {
		start := time.Now()
		v, err := readCounter(ctx, data, c.name)
		if err != nil {
			return err
		}
		if err := sleep(ctx, c.hold); err != nil {
			return err
		}
		if err := writeCounter(ctx, data, c.name, v+1); err != nil {
			return err
		}
		out.emit(event{Ev: "section", Worker: c.id, Round: round, Token: token,
			Start: start.UnixNano(), End: time.Now().UnixNano(), Read: v})
		return nil
	}
	if c.unguarded {
		return body(ctx, 0)
	}
	return lock.Do(ctx, locker, c.key, func(ctx context.Context, lease *lock.Lease) error {
		return body(ctx, lease.Token())
	}, lock.WithTTL(c.ttl))
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
