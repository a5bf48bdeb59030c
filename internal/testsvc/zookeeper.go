package testsvc

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Where Debian's zookeeper package puts the server and the SLF4J binding
// that gives it a log (without it the server logs nothing).
const (
	zkJar         = "/usr/share/java/zookeeper.jar"
	zkSLF4JSimple = "/usr/share/java/slf4j-simple.jar"
)

// zkStartTimeout bounds how long Start waits for `srvr` to report a Mode.
// A cold start serves after about 0.3 s, a restart after 0.7 s (SERVICES.md).
const zkStartTimeout = 30 * time.Second

// ZooKeeperServer is a standalone ZooKeeper child process owned by one test,
// for tests that stop, pause or restart the server. Its data directory lives
// in t.TempDir() and survives Stop, Start and Restart, so znodes, sessions and
// the zxid counter (and with it czxid fencing tokens) survive a restart. All
// methods are safe for concurrent use; Start and Restart report failures with
// t.Fatalf.
type ZooKeeperServer struct {
	t    testing.TB
	java string
	dir  string
	port int
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
}

// ZooKeeperConfig is the configuration StartZooKeeper writes before the
// caller's extra lines: fast session expiry (sessions of 1-10 s, checked
// every 500 ms), no AdminServer on 8080, every four-letter word allowed.
const ZooKeeperConfig = `tickTime=500
minSessionTimeout=1000
maxSessionTimeout=10000
admin.enableServer=false
4lw.commands.whitelist=*
`

// StartZooKeeper starts a private standalone ZooKeeper (Debian's zookeeper
// package: java and /usr/share/java/zookeeper.jar) on a free port of
// 127.0.0.1 with its data directory in t.TempDir(), waits until the
// four-letter word `srvr` reports a Mode (ruok answers before the server
// serves), and stops it in t.Cleanup. The configuration is ZooKeeperConfig
// followed by extra, one setting per string ("maxSessionTimeout=40000"); a
// later line overrides an earlier one. It calls Unavailable when java or the
// jar is missing (apt-get install zookeeper). The log is zookeeper.log in the
// server's directory and is shown when it fails to start.
func StartZooKeeper(t testing.TB, extra ...string) *ZooKeeperServer {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		Unavailable(t, "testsvc: java not found on PATH (apt-get install zookeeper)")
	}
	if _, err := os.Stat(zkJar); err != nil {
		Unavailable(t, "testsvc: %s missing (apt-get install zookeeper)", zkJar)
	}
	s := &ZooKeeperServer{t: t, java: java, dir: t.TempDir()}
	s.log = filepath.Join(s.dir, "zookeeper.log")
	t.Cleanup(func() {
		s.Stop()
		releasePort(s.port)
	})
	var lastErr error
	for range 5 {
		s.port = FreePort(t)
		reservePort(s.port)
		cfg := ZooKeeperConfig +
			"dataDir=" + filepath.Join(s.dir, "data") + "\n" +
			"clientPort=" + strconv.Itoa(s.port) + "\n" +
			"clientPortAddress=127.0.0.1\n" +
			strings.Join(extra, "\n") + "\n"
		if err := os.WriteFile(s.configPath(), []byte(cfg), 0o644); err != nil {
			t.Fatalf("testsvc: write zoo.cfg: %v", err)
		}
		s.mu.Lock()
		lastErr = s.startLocked()
		s.mu.Unlock()
		if lastErr == nil {
			return s
		}
		releasePort(s.port)
	}
	t.Fatalf("testsvc: start zookeeper: %v", lastErr)
	return nil
}

func (s *ZooKeeperServer) configPath() string { return filepath.Join(s.dir, "zoo.cfg") }

// Endpoint returns the client address, 127.0.0.1:PORT, as ZooKeeper clients
// take it. It stays the same across Stop, Start and Restart.
func (s *ZooKeeperServer) Endpoint() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// Pid returns the process id of the running server, or 0 when it is stopped.
func (s *ZooKeeperServer) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop ends the server with SIGTERM (a paused server is continued so it can
// exit) and waits until the process is gone; after 10 s it is killed. The data
// directory is kept. Stopping a stopped server does nothing.
func (s *ZooKeeperServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// Start starts the server again on the same port and data directory, after
// Stop or after the process died, and waits until it serves. Starting a
// running server does nothing.
func (s *ZooKeeperServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runningLocked() {
		return
	}
	var err error
	for i := range 10 {
		if err = s.startLocked(); err == nil {
			return
		}
		time.Sleep(time.Duration(i+1) * 50 * time.Millisecond)
	}
	s.t.Fatalf("testsvc: restart zookeeper on %s: %v", s.Endpoint(), err)
}

// Restart stops the server and starts it again on the same port and data:
// znodes, sessions (whose timeouts start again) and the zxid counter survive.
func (s *ZooKeeperServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// Signal sends sig to the server process, e.g. syscall.SIGSTOP and
// syscall.SIGCONT to pause and resume it, or syscall.SIGKILL to crash it.
// It fails when the server is not running.
func (s *ZooKeeperServer) Signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return fmt.Errorf("testsvc: zookeeper on %s is not running", s.Endpoint())
	}
	return s.cmd.Process.Signal(sig)
}

func (s *ZooKeeperServer) runningLocked() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// startLocked starts a process and waits until it serves; on failure the
// process is gone when it returns.
func (s *ZooKeeperServer) startLocked() error {
	cp := zkJar
	if _, err := os.Stat(zkSLF4JSimple); err == nil {
		cp += ":" + zkSLF4JSimple
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", cp,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.configPath())
	cmd.Dir = s.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(zkStartTimeout)
	for {
		if out, err := ZooKeeperFourLetter(s.Endpoint(), "srvr"); err == nil && strings.Contains(out, "Mode:") {
			select {
			case <-done: // another server on this port answered
			default:
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("zookeeper exited (%v); log:\n%s", cmd.ProcessState, tail(s.log, 2000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stopLocked()
			return fmt.Errorf("not serving within %v; log:\n%s", zkStartTimeout, tail(s.log, 2000))
		}
	}
}

func (s *ZooKeeperServer) stopLocked() {
	if !s.runningLocked() {
		return
	}
	terminate(s.cmd.Process)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// ZooKeeperFourLetter sends a four-letter word ("srvr", "ruok", "cons") to
// the server at addr and returns its whole answer. The word is sent without a
// trailing newline, which made some answers come back empty (SERVICES.md).
func ZooKeeperFourLetter(addr, word string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, checkTimeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(checkTimeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, word); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}
