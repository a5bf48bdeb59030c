package suitekit

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Child is the test binary re-executed to play one role in a check that
// needs several processes.
type Child struct {
	Cmd   *exec.Cmd
	In    io.WriteCloser // the child's standard input
	Lines <-chan string  // its stdout, line by line; closed at EOF

	waitOnce sync.Once
	waitErr  error
}

// Wait waits for the child to exit and returns how it ended. Unlike
// Cmd.Wait it may be called more than once, from any goroutine (a test's
// own wait and the cleanup's both call it).
func (c *Child) Wait() error {
	c.waitOnce.Do(func() { c.waitErr = c.Cmd.Wait() })
	return c.waitErr
}

// StartChild re-executes the test binary, running no test, with env added
// to its environment; the variables tell it its role. The child dies with
// the test binary (on Linux) and is resumed and killed when t ends.
func StartChild(t *testing.T, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = procAttr()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	c := &Child{Cmd: cmd, In: in, Lines: lines}
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = c.Cmd.Process.Signal(syscall.SIGCONT)
		_ = c.Cmd.Process.Kill()
		_ = c.Wait()
	})
	return c
}

// Expect waits up to within for a line starting with prefix and returns the
// rest, trimmed; fn, if set, sees every line before it. It fails t if the
// child exits or stays silent first.
func (c *Child) Expect(t *testing.T, prefix string, within time.Duration, fn func(line string)) string {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-c.Lines:
			if !ok {
				t.Fatalf("child exited while the test waited for %q", prefix)
			}
			if fn != nil {
				fn(line)
			}
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return strings.TrimSpace(rest)
			}
		case <-timeout:
			t.Fatalf("child said no %q within %v", prefix, within)
		}
	}
}

// Signal sends s to the child; a child already gone is no error.
func (c *Child) Signal(s syscall.Signal) { _ = c.Cmd.Process.Signal(s) }
