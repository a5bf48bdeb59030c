package rwlocktest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/internal/suitekit"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/rwlock"
)

// A Target is a backend opened the same way in the test process and in the
// child processes RunProcesses starts.
type Target struct {
	// Name identifies the target to child processes: unique within the test
	// binary, without spaces.
	Name string
	// Open connects to the target described by config (an address, a DSN,
	// a prefix: whatever the test chose). It runs in the test process and
	// in every child.
	Open func(ctx context.Context, config string) (*rwlock.Locker, error)
}

// Environment of a child process.
const (
	envRole   = "LATCHKEY_RWLOCKTEST_ROLE"
	envTarget = "LATCHKEY_RWLOCKTEST_TARGET"
	envConfig = "LATCHKEY_RWLOCKTEST_CONFIG"
	envArgs   = "LATCHKEY_RWLOCKTEST_ARGS"
)

// procTTL is the lease of the process checks' holders.
const procTTL = time.Second

// Child runs, in a child process started by RunProcesses, the child's part,
// and exits; in any other process it returns at once. Call it first in the
// test package's TestMain:
//
//	func TestMain(m *testing.M) {
//		rwlocktest.Child(targets...)
//		os.Exit(m.Run())
//	}
func Child(targets ...Target) {
	role := os.Getenv(envRole)
	if role == "" {
		return
	}
	name := os.Getenv(envTarget)
	for _, t := range targets {
		if t.Name != name {
			continue
		}
		ctx := context.Background()
		l, err := t.Open(ctx, os.Getenv(envConfig))
		if err != nil {
			fmt.Fprintf(os.Stderr, "rwlocktest child: open %s: %v\n", name, err)
			os.Exit(2)
		}
		args := strings.Fields(os.Getenv(envArgs))
		var code int
		switch role {
		case "churn":
			code = churnChild(ctx, l, args)
		case "hold":
			code = holdChild(ctx, l, args)
		default:
			fmt.Fprintf(os.Stderr, "rwlocktest child: unknown role %q\n", role)
			code = 2
		}
		_ = l.Close()
		os.Exit(code)
	}
	fmt.Fprintf(os.Stderr, "rwlocktest child: unknown target %q (not passed to rwlocktest.Child)\n", name)
	os.Exit(2)
}

// RunProcesses runs the checks that need several processes on target,
// opened with config: a writer is alone across processes; killed (SIGKILL)
// holders' locks come back after their TTL and never before; a stopped
// (SIGSTOP) writer's fenced write is refused after it resumes. It needs the
// test binary's TestMain to call Child.
func RunProcesses(t *testing.T, target Target, config string) {
	if runtime.GOOS != "linux" {
		t.Skip("rwlocktest: the process checks need Linux (one monotonic clock across processes)")
	}
	p := &procs{target: target, config: config}
	t.Run("WriterAloneAcrossProcesses", func(t *testing.T) { t.Parallel(); p.writerAlone(t) })
	for _, mode := range []rwlock.Mode{rwlock.Read, rwlock.Write} {
		t.Run("KilledHolderBackAfterTTL/"+mode.String(), func(t *testing.T) { t.Parallel(); p.killed(t, mode) })
		t.Run("StoppedHolderFenced/"+mode.String(), func(t *testing.T) { t.Parallel(); p.stopped(t, mode) })
	}
}

type procs struct {
	target Target
	config string
}

func (p *procs) open(t *testing.T) *rwlock.Locker {
	t.Helper()
	l, err := p.target.Open(t.Context(), p.config)
	if err != nil {
		t.Fatalf("open %s: %v", p.target.Name, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// start starts a child process playing role with args.
func (p *procs) start(t *testing.T, role string, args ...string) *suitekit.Child {
	t.Helper()
	return suitekit.StartChild(t, envRole+"="+role, envTarget+"="+p.target.Name, envConfig+"="+p.config, envArgs+"="+strings.Join(args, " "))
}

// writerAlone: three processes take one name in turns, mostly reading,
// and log every enter and leave to one file in appends, which the kernel
// orders; replayed, the log must show every writer alone.
func (p *procs) writerAlone(t *testing.T) {
	const children, rounds = 3, 40
	n := name(t)
	logPath := t.TempDir() + "/holders.log"
	if err := os.WriteFile(logPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var cs []*suitekit.Child
	for range children {
		cs = append(cs, p.start(t, "churn", n, strconv.Itoa(rounds), logPath))
	}
	for i, c := range cs {
		c.Expect(t, "done", 2*time.Minute, nil)
		if err := c.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2*children*rounds {
		t.Fatalf("log has %d lines, want %d", len(lines), 2*children*rounds)
	}
	readers, writers, mostReaders, writes := 0, 0, 0, 0
	for i, line := range lines {
		switch line[:strings.IndexByte(line, ' ')] {
		case "enter-w":
			if readers != 0 || writers != 0 {
				t.Fatalf("line %d: a writer entered with %d readers and %d writers inside: %q", i, readers, writers, line)
			}
			writers++
			writes++
		case "leave-w":
			writers--
		case "enter-r":
			if writers != 0 {
				t.Fatalf("line %d: a reader entered with a writer inside: %q", i, line)
			}
			readers++
			mostReaders = max(mostReaders, readers)
		case "leave-r":
			readers--
		default:
			t.Fatalf("line %d: %q", i, line)
		}
	}
	t.Logf("%d holds, %d of them writes; at most %d readers at once across processes", len(lines)/2, writes, mostReaders)
	if writes == 0 {
		t.Fatal("no writes: the check checked nothing")
	}
}

// churnChild takes name rounds times, a write one time in four, holds
// it a moment, and appends "enter-r|w pid" and "leave-r|w pid" to the log.
func churnChild(ctx context.Context, l *rwlock.Locker, args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "churn: want name rounds log")
		return 2
	}
	n, log := args[0], args[2]
	rounds, _ := strconv.Atoi(args[1])
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		return 2
	}
	defer f.Close()
	pid := os.Getpid()
	for range rounds {
		mode := rwlock.Read
		if rand.N(4) == 0 {
			mode = rwlock.Write
		}
		lease, err := acquire(ctx, l, mode, n, lock.WithTTL(procTTL))
		if err != nil {
			fmt.Fprintln(os.Stderr, "churn:", err)
			return 1
		}
		tag := "r"
		if mode == rwlock.Write {
			tag = "w"
		}
		_, _ = fmt.Fprintf(f, "enter-%s %d\n", tag, pid)
		time.Sleep(time.Duration(rand.N(3000)) * time.Microsecond)
		_, _ = fmt.Fprintf(f, "leave-%s %d\n", tag, pid)
		if err := lease.Release(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "churn:", err)
			return 1
		}
	}
	fmt.Println("done")
	return 0
}

// other returns the mode that a holder in mode keeps out.
func other(mode rwlock.Mode) rwlock.Mode {
	if mode == rwlock.Read {
		return rwlock.Write
	}
	return rwlock.Read
}

// killed: a child holds name in mode and renews; it is killed. A waiter of
// the other mode gets in after the child's last renewal (or acquisition)
// plus the TTL, and never before.
func (p *procs) killed(t *testing.T, mode rwlock.Mode) {
	n := name(t)
	l := p.open(t)
	c := p.start(t, "hold", n, mode.String())
	var last int64 // when the last confirmed renewal (or the acquisition) was sent, monotonic ns
	note := func(line string) {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "renewed" || f[0] == "held") {
			if at, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				last = max(last, at)
			}
		}
	}
	c.Expect(t, "held ", 30*time.Second, note)
	c.Expect(t, "renewed ", 10*time.Second, note) // it renews
	if err := c.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	for line := range c.Lines { // what it said before it died
		note(line)
	}
	refused(t, l, other(mode), n, "right after its holder was killed", lock.WithTTL(procTTL))
	lease, err := acquire(t.Context(), l, other(mode), n, lock.WithWait(eventually), lock.WithTTL(procTTL))
	got := suitekit.Now()
	if err != nil {
		t.Fatalf("killed %v holder's lock not back: %v", mode, err)
	}
	defer lease.Release(context.Background())
	if early := time.Duration(last + int64(procTTL) - got); early > 0 {
		t.Fatalf("a killed %v holder's lock came back %v before its TTL ran out", mode, early)
	}
	t.Logf("back %v after the holder's last renewal was sent", time.Duration(got-last))
}

// stopped: a child holds name in mode and is stopped (SIGSTOP) past its
// TTL. A writer gets in meanwhile, with a higher token, and writes to a
// fenced resource, here this process's. Resumed, the child's Done closes,
// and the write it makes with its old token is refused.
func (p *procs) stopped(t *testing.T, mode rwlock.Mode) {
	n := name(t)
	l := p.open(t)
	c := p.start(t, "hold", n, mode.String())
	f := strings.Fields(c.Expect(t, "held ", 30*time.Second, nil))
	first, _ := strconv.ParseUint(f[0], 10, 64)
	if err := c.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := suitekit.Now()
	w, err := l.Lock(t.Context(), n, lock.WithWait(eventually), lock.WithTTL(procTTL))
	if err != nil {
		t.Fatalf("stopped %v holder's lock not back: %v", mode, err)
	}
	defer w.Release(context.Background())
	if w.Token() <= first {
		t.Fatalf("writer's token %d <= the stopped holder's %d", w.Token(), first)
	}
	// The resource applies the writer's write and remembers its token.
	highest := w.Token()
	t.Logf("writer in %v after the stop", time.Duration(suitekit.Now()-stopped))
	time.Sleep(procTTL / 2) // still stopped, past its deadline
	if err := c.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c.In, "write\n"); err != nil {
		t.Fatal(err)
	}
	f = strings.Fields(c.Expect(t, "write ", 30*time.Second, nil))
	late, _ := strconv.ParseUint(f[0], 10, 64)
	if len(f) < 2 || f[1] != "lost" {
		t.Fatalf("resumed holder's lease not lost before it wrote: %q", f)
	}
	if err := fence.Check(highest, fence.Token(late)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("resumed %v holder's write with token %d after the writer's %d: %v, want fence.ErrStale", mode, late, highest, err)
	}
}

// holdChild takes name in mode with procTTL and holds it, printing "held
// <token> <sent>" and "renewed <token> <sent>" for each confirmed renewal
// (sent: when it was sent, monotonic ns). On "write" from stdin it prints
// "write <token> lost" or "write <token> held", after waiting up to a second
// for Done.
func holdChild(ctx context.Context, l *rwlock.Locker, args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "hold: want name mode")
		return 2
	}
	n := args[0]
	mode := rwlock.Read
	if args[1] == rwlock.Write.String() {
		mode = rwlock.Write
	}
	var token atomic.Uint64
	l.SetObserver(func(e lock.Event) {
		if e.Kind == lock.EventRenew && e.Err == nil {
			fmt.Printf("renewed %d %d\n", token.Load(), suitekit.Now()-int64(e.Duration))
		}
	})
	sent := suitekit.Now()
	lease, err := acquire(ctx, l, mode, n, lock.WithTTL(procTTL))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		return 1
	}
	token.Store(lease.Token())
	fmt.Printf("held %d %d\n", lease.Token(), sent)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() != "write" {
			continue
		}
		state := "held"
		select {
		case <-lease.Done():
			state = "lost"
		case <-time.After(time.Second):
		}
		fmt.Printf("write %d %s\n", lease.Token(), state)
	}
	return 0
}
