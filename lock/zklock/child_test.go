package zklock_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A child is a helper process of a test (a kazoo script, a Curator program,
// this test binary holding a lock), driven line by line: commands on its
// stdin, answers on its stdout. Its stderr goes to a file of its own, shown
// when it does not answer as expected.
type child struct {
	t      *testing.T
	name   string // in messages: "kazoo", "Curator"
	cmd    *exec.Cmd
	in     io.Writer
	lines  <-chan string
	stderr string
}

// startChild starts cmd and stops it in t.Cleanup: when grace > 0 it first
// closes the child's stdin, on which the child ends its session and exits,
// and waits up to grace; then the child is continued (in case a test
// stopped it) and killed. It dies with the test too.
func startChild(t *testing.T, name string, cmd *exec.Cmd, grace time.Duration) *child {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &child{t: t, name: name, cmd: cmd, stderr: filepath.Join(t.TempDir(), "stderr")}
	errf, err := os.Create(c.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stderr = errf
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
	t.Cleanup(func() {
		if grace > 0 {
			_ = in.Close()
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	c.in, c.lines = in, lines
	return c
}

// send writes one line to the child.
func (c *child) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("to %s: %v", c.name, err)
	}
}

// next returns the child's next line, and fails if the child exits or says
// nothing within d instead; want, what the test waits for, is in the
// message.
func (c *child) next(want string, d time.Duration) string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("%s exited, want %q; stderr:\n%s", c.name, want, readFile(c.stderr))
		}
		return line
	case <-time.After(d):
		c.t.Fatalf("%s did not say %q within %v; stderr:\n%s", c.name, want, d, readFile(c.stderr))
		return ""
	}
}

// expect fails unless the child's next line, within 30 s, is want.
func (c *child) expect(want string) {
	c.t.Helper()
	if got := c.next(want, 30*time.Second); got != want {
		c.t.Fatalf("%s said %q, want %q; stderr:\n%s", c.name, got, want, readFile(c.stderr))
	}
}

// quiet fails if the child says anything within d.
func (c *child) quiet(d time.Duration, why string) {
	c.t.Helper()
	select {
	case line := <-c.lines:
		c.t.Fatalf("%s said %q %s", c.name, line, why)
	case <-time.After(d):
	}
}

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}
