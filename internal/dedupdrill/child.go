package dedupdrill

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Environment of a child process.
const (
	envRole = "LATCHKEY_DEDUPDRILL_ROLE"
	envArg  = "LATCHKEY_DEDUPDRILL_ARG"
)

// A Role is a part a re-executed test binary can play.
type Role struct {
	// Name identifies the role to the child: unique within the test binary.
	Name string
	// Run plays the role with the argument StartChild was given. It writes
	// what the parent waits for to stdout, one line at a time, and normally
	// runs until it is killed; an error ends the child with exit status 2.
	Run func(ctx context.Context, arg string) error
}

// Main runs the tests or, in a child started by StartChild, the child's
// role, and exits. A test package whose tests start children hands its
// TestMain to it, with the roles its children play; Run's drills need
// [Target.Role].
func Main(m *testing.M, roles ...Role) {
	name := os.Getenv(envRole)
	if name == "" {
		os.Exit(m.Run())
	}
	for _, r := range roles {
		if r.Name != name {
			continue
		}
		if err := r.Run(context.Background(), os.Getenv(envArg)); err != nil {
			fmt.Fprintf(os.Stderr, "dedupdrill child %s: %v\n", name, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "dedupdrill child: unknown role %q (not passed to dedupdrill.Main)\n", name)
	os.Exit(2)
}

// Child is the test binary re-executed to play a role, a consumer process
// the test can kill.
type Child struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line; closed at EOF
	stderr *lockedBuffer
	wait   func() error
}

// StartChild re-executes the test binary as role (which the package's
// TestMain must pass to Main) with arg. The child is killed and reaped at
// cleanup, and dies with the test binary.
func StartChild(t testing.TB, role, arg string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envArg+"="+arg)
	c := &Child{cmd: cmd, lines: make(chan string, 1024), stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	cmd.SysProcAttr = procAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case c.lines <- sc.Text():
			default: // nobody is listening for so much: drop
			}
		}
	}()
	// Wait must not run before stdout is read to the end.
	c.wait = sync.OnceValue(func() error { <-scanned; return cmd.Wait() })
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = c.wait()
	})
	return c
}

// Expect waits for a line of the child's stdout starting with prefix and
// returns the rest of it, trimmed. It fails the test when the child exits or
// within passes first.
func (c *Child) Expect(t testing.TB, prefix string, within time.Duration) string {
	t.Helper()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited (%v) while the test waited for %q; stderr:\n%s", c.wait(), prefix, c.stderr.tail())
			}
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return strings.TrimSpace(rest)
			}
		case <-timeout.C:
			t.Fatalf("child said no %q within %v; stderr:\n%s", prefix, within, c.stderr.tail())
		}
	}
}

// Kill sends SIGKILL and waits for the child to be gone. It fails the test
// unless the child died of the signal: one that had exited already was not
// killed mid-work.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	err := c.wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v, want killed by SIGKILL; stderr:\n%s", err, c.stderr.tail())
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && (!ws.Signaled() || ws.Signal() != syscall.SIGKILL) {
		t.Fatalf("child: %v, want killed by SIGKILL; stderr:\n%s", err, c.stderr.tail())
	}
}

// Say writes one line to stdout for the parent's Expect.
func Say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// lockedBuffer is a bytes.Buffer safe for the writes of exec's copying
// goroutine and the test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// tail returns the last 4 KB written, for failure messages.
func (l *lockedBuffer) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	if len(s) > 4096 {
		s = "..." + s[len(s)-4096:]
	}
	return s
}
