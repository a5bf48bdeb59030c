package fencetest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// child is a re-executed test binary playing one role.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // stdout, line by line; closed at EOF
}

func startChild(t *testing.T, target Target, config, role, args string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envTarget+"="+target.Name, envConfig+"="+config, envArgs+"="+args)
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
	c := &child{cmd: cmd, in: in, lines: make(chan string, 1024)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
	return c
}

// expect waits for a line starting with prefix and returns the rest.
func (c *child) expect(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited while the test waited for %q", prefix)
			}
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return strings.TrimSpace(rest)
			}
		case <-timeout:
			t.Fatalf("child said no %q within %v", prefix, within)
		}
	}
}

func (c *child) signal(s syscall.Signal) { _ = c.cmd.Process.Signal(s) }
