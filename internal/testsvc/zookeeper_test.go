package testsvc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestZooKeeperServer(t *testing.T) {
	t.Parallel()
	s := StartZooKeeper(t, "maxSessionTimeout=20000")
	out, err := ZooKeeperFourLetter(s.Endpoint(), "srvr")
	if err != nil || !strings.Contains(out, "Mode: standalone") {
		t.Fatalf("srvr = %q, %v", out, err)
	}
	if out, _ := ZooKeeperFourLetter(s.Endpoint(), "conf"); !strings.Contains(out, "maxSessionTimeout=20000") ||
		!strings.Contains(out, "minSessionTimeout=1000") || !strings.Contains(out, "tickTime=500") {
		t.Errorf("conf does not show the fast-expiry config with the extra line applied:\n%s", out)
	}
	pid := s.Pid()
	if pid == 0 {
		t.Fatal("Pid() = 0 for a running server")
	}
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, pid)
	if _, err := zkTry(s.Endpoint(), 300*time.Millisecond); err == nil {
		t.Fatal("a SIGSTOPped server answered srvr")
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	checkRestartStopStart(t, s.process, func() error {
		if out, err := ZooKeeperFourLetter(s.Endpoint(), "srvr"); err != nil || !strings.Contains(out, "Mode:") {
			return fmt.Errorf("srvr = %q, %v", out, err)
		}
		return nil
	})
}

// waitStopped waits until every thread of pid is stopped: SIGSTOP takes
// effect asynchronously, and a thread still running can answer a request.
// Without /proc it waits a moment instead.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(stats) == 0 {
			time.Sleep(100 * time.Millisecond)
			return
		}
		stopped := true
		for _, f := range stats {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread exited
			}
			// The state follows the parenthesised command name.
			if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("process %d not stopped 10 s after SIGSTOP", pid)
}

// zkTry is srvr with a short deadline, for a server that may not answer.
func zkTry(addr string, d time.Duration) (string, error) {
	done := make(chan struct{})
	var out string
	var err error
	go func() {
		defer close(done)
		out, err = ZooKeeperFourLetter(addr, "srvr")
	}()
	select {
	case <-done:
		if err == nil && out == "" {
			err = errEmpty
		}
		return out, err
	case <-time.After(d):
		<-done // bounded by checkTimeout
		return "", errTimeout
	}
}

type zkErr string

func (e zkErr) Error() string { return string(e) }

const (
	errEmpty   zkErr = "empty answer"
	errTimeout zkErr = "no answer in time"
)
