package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// Environment variables "latchkey run" sets for the command.
const (
	envFencingToken = "LATCHKEY_FENCING_TOKEN"
	envLockKey      = "LATCHKEY_LOCK_KEY"
	envBackend      = "LATCHKEY_BACKEND" // read: the default for --backend
)

// guardCommand is the hidden command latchkey starts itself as, to start a
// supervised command and kill it when latchkey dies (see child).
const guardCommand = "command-guard"

func defaultRunBackend() string {
	if b := os.Getenv(envBackend); b != "" {
		return b
	}
	return "sqlite://" + filepath.ToSlash(filepath.Join(os.TempDir(), "latchkey-run-locks.db"))
}

const runUsage = `usage: latchkey run --key KEY [flags] -- command [args...]
       latchkey run --permits N --key KEY [flags] -- command [args...]

Runs the command while holding a distributed lock on KEY, like flock(1) across
hosts: one cron job on many machines, one migration at a time. The lease is
renewed while the command runs; the command gets the fencing token in
$LATCHKEY_FENCING_TOKEN (and the key in $LATCHKEY_LOCK_KEY) to hand to
whatever it writes, so a writer whose lease has passed on can be refused.
If the lease is lost, the command gets SIGTERM, then SIGKILL after --grace.
Signals sent to latchkey are forwarded to the command's process group. The
lock is released when the command ends.

If latchkey dies, even of SIGKILL or the OOM killer, the command and every
process it started die with it (on Unix: a guard process watches latchkey),
so no job runs on beside the next holder. A latchkey that is paused instead
(SIGSTOP, a frozen VM, a stalled host) cannot stop its command: its lease
runs out, another host's run starts, and the paused command may write when it
wakes. Only the fencing token guards that case: have whatever the command
writes refuse a token lower than the highest it has seen.

With --shared or --exclusive the lock is KEY's read-write lock instead: runs
with --shared hold it together (readers of a table), a run with --exclusive
holds it alone (the job that rewrites it), and while an --exclusive run waits,
new --shared runs wait behind it. The token still fences: an --exclusive run's
is above every earlier run's, a --shared run's above the last --exclusive's.

With --permits N, KEY names a semaphore of N permits instead of a lock: at
most N of this command run at once across hosts (all must give the same N),
each under one permit, with the same lease, token and statuses.

Without --backend (or $LATCHKEY_BACKEND) the lock is a SQLite file on this
host: it excludes only commands on this host, not the same job on others.

One name is one resource: on Redis, SQLite, PostgreSQL, MySQL and etcd,
runs with --permits, with --shared or --exclusive, or with neither (and
"latchkey elect") do not get in while KEY is held in another of these modes;
they fail at once (exit 75) saying how KEY is held. On ZooKeeper --permits is
refused likewise, and the others queue together.

Exit status: the command's own; 128+N if it died of signal N; 75 if the lock
was not acquired (held elsewhere and --wait ran out, or held in another mode); 76 if the lease was lost
while the command ran; 69 if the backend failed; 127 if the command could not
be started; 2 for usage errors; 130 if interrupted while waiting.

Flags:
`

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), runUsage); fs.PrintDefaults() }
	key := fs.String("key", "", "the lock's key (required)")
	permits := fs.Int("permits", 0, "hold one of N permits of a semaphore on KEY instead of the lock: at most N at once")
	ttl := fs.Duration("ttl", lock.DefaultTTL, "lease length; renewed every ttl/3 while the command runs")
	wait := waitForever
	fs.Var(&wait, "wait", "how long to wait for a held lock, a `duration`: 0 tries once, forever waits until interrupted")
	grace := fs.Duration("grace", 10*time.Second, "after a lost lease, time between SIGTERM and SIGKILL")
	holder := fs.String("holder", defaultHolder(), "who holds the lock, as lock ls and show print it: at most "+strconv.Itoa(lock.MaxHolderLen)+" bytes, no secrets")
	backend := backendFlag(fs, "lock backend URL: sqlite:///path, postgres://..., redis://host:port, ...")
	rw := addRWFlags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	argv := fs.Args()
	switch {
	case *key == "":
		fmt.Fprintln(stderr, "latchkey run: --key is required")
		return exitUsage
	case len(argv) == 0:
		fmt.Fprintln(stderr, "latchkey run: no command given (write it after --)")
		return exitUsage
	case *grace < 0:
		fmt.Fprintln(stderr, "latchkey run: --grace must not be negative")
		return exitUsage
	case rw.check() != "":
		fmt.Fprintln(stderr, rw.check())
		return exitUsage
	case *permits < 0 || flagSet(fs, "permits") && *permits == 0:
		fmt.Fprintln(stderr, "latchkey run: --permits must be at least 1")
		return exitUsage
	case *permits > 0 && (*rw.shared || *rw.exclusive):
		fmt.Fprintln(stderr, "latchkey run: --permits cannot be combined with --shared or --exclusive")
		return exitUsage
	}
	if !flagSet(fs, "backend") && os.Getenv(envBackend) == "" {
		fmt.Fprintln(stderr, "latchkey run: no --backend: the lock is a SQLite file on this host and excludes only commands on this host")
	}

	opts := []lock.Option{lock.WithTTL(*ttl), lock.WithHolder(*holder)}
	if wait != waitForever {
		opts = append(opts, lock.WithWait(time.Duration(wait)))
	}
	if *permits > 0 {
		return runWithPermit(ctx, *backend, *key, *permits, opts, argv, *grace, stderr)
	}
	locker, err := rw.open(ctx, *backend)
	if err != nil {
		return usageOrUnavailable("latchkey run", err, stderr, lock.ErrInvalid)
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, *key, opts...)
	if err != nil {
		return acquireFailed(ctx, err, "lock held elsewhere", "the lock", stderr)
	}
	code := supervise(lease, *key, argv, *grace, "latchkey run", stderr)

	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := lease.Release(rctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
		fmt.Fprintf(stderr, "latchkey run: release: %v (the lock expires after its TTL)\n", err)
	}
	return code
}

// acquireFailed reports an Acquire that failed, held saying why when it
// was held elsewhere and what naming what was waited for, and returns the
// exit status.
func acquireFailed(ctx context.Context, err error, held, what string, stderr io.Writer) int {
	var mode *lock.ModeError
	switch {
	case errors.As(err, &mode):
		fmt.Fprintf(stderr, "latchkey run: %v; not running the command\n", mode)
		return exitNotAcquired
	case errors.Is(err, lock.ErrNotAcquired):
		fmt.Fprintf(stderr, "latchkey run: %s; not running the command\n", held)
		return exitNotAcquired
	case errors.Is(err, lock.ErrInvalid):
		fmt.Fprintf(stderr, "latchkey run: %v\n", err)
		return exitUsage
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "latchkey run: interrupted while waiting for %s\n", what)
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "latchkey run: %v\n", err)
		return exitUnavailable
	}
}

// waitFlag is --wait: a duration of zero or more, or forever. A negative
// duration is refused: it once meant forever, which nobody reading
// "--wait -1s" would guess.
type waitFlag time.Duration

const waitForever waitFlag = -1

func (w *waitFlag) String() string {
	if *w < 0 {
		return "forever"
	}
	return time.Duration(*w).String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		*w = waitForever
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 30s, or forever")
	}
	if d < 0 {
		return errors.New("must not be negative: 0 tries once, forever waits until interrupted")
	}
	*w = waitFlag(d)
	return nil
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// supervise runs argv under lease, taken on key, and returns the exit
// status to report; who names the command in messages.
func supervise(lease *lock.Lease, key string, argv []string, grace time.Duration, who string, stderr io.Writer) int {
	env := []string{envFencingToken + "=" + strconv.FormatUint(lease.Token(), 10), envLockKey + "=" + key}

	// Catch signals before the command starts, so none is lost in between.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	c, err := startChild(argv, env, who)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return exitNoCommand
	}
	exited := make(chan error, 1)
	go func() { exited <- c.wait() }()

	lost := lease.Done()
	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			if lost == nil { // we stopped it, or it ended as the lease went
				return exitLeaseLost
			}
			select {
			case <-lease.Done():
				fmt.Fprintf(stderr, "%s: lease lost as the command ended: %v\n", who, lease.Err())
				return exitLeaseLost
			default:
			}
			return exitStatus(err, who, stderr)
		case s := <-sigs:
			c.signal(s)
		case <-lost:
			lost = nil
			fmt.Fprintf(stderr, "%s: %v; stopping the command (SIGTERM, SIGKILL after %v)\n", who, lease.Err(), grace)
			c.signal(syscall.SIGTERM)
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			c.signal(syscall.SIGKILL)
		}
	}
}

// exitStatus turns the command's end into the status a shell would report.
func exitStatus(err error, who string, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "%s: %v\n", who, err)
	return exitFail
}
