package testsvc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// RedisServer is a redis-server child process owned by one test, for tests
// that stop, pause or restart the server. It keeps nothing on disk, so a
// restart brings it back empty. All methods are safe for concurrent use;
// Start and Restart report failures with t.Fatalf.
type RedisServer struct {
	t    testing.TB
	bin  string
	args []string
	dir  string
	port int
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
}

// redisStartTimeout bounds how long Start waits for PING.
const redisStartTimeout = 10 * time.Second

// StartRedis starts a private redis-server (as a child process, not
// daemonized) on a free port of 127.0.0.1 with
// --port P --bind 127.0.0.1 --save "" --appendonly no --dir <t.TempDir()>
// followed by args, waits until it answers PING, and stops it in t.Cleanup.
// It calls Unavailable when redis-server is not on PATH. The log is
// redis.log in the server's directory and is shown when it fails to start.
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "testsvc: redis-server not found on PATH (apt-get install redis-server)")
	}
	s := &RedisServer{t: t, bin: bin, args: args, dir: t.TempDir()}
	s.log = filepath.Join(s.dir, "redis.log")
	t.Cleanup(func() {
		s.Stop()
		releasePort(s.port)
	})
	// A port that was free a moment ago can be taken by the time the server
	// binds it; try a few.
	var lastErr error
	for range 5 {
		s.port = FreePort(t)
		reservePort(s.port)
		s.mu.Lock()
		lastErr = s.startLocked()
		s.mu.Unlock()
		if lastErr == nil {
			return s
		}
		releasePort(s.port)
	}
	t.Fatalf("testsvc: start redis-server: %v", lastErr)
	return nil
}

// Addr returns the server's address, 127.0.0.1:PORT. It stays the same
// across Stop, Start and Restart.
func (s *RedisServer) Addr() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// Pid returns the process id of the running server, or 0 when it is stopped.
func (s *RedisServer) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop ends the server with SIGTERM (a paused server is continued so it can
// exit) and waits until the process is gone; after 10 s it is killed. Stopping
// a stopped server does nothing.
func (s *RedisServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// Start starts the server again on the same port, after Stop or after the
// process died (say, from Signal(syscall.SIGKILL)), and waits until it answers
// PING. Starting a running server does nothing.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runningLocked() {
		return
	}
	var err error
	// The port may still be held for a moment by the old process's sockets
	// or, rarely, by someone else's connection; retry briefly.
	for i := range 20 {
		if err = s.startLocked(); err == nil {
			return
		}
		time.Sleep(time.Duration(i+1) * 25 * time.Millisecond)
	}
	s.t.Fatalf("testsvc: restart redis-server on %s: %v", s.Addr(), err)
}

// Restart stops the server and starts it again on the same port: it comes back
// empty.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// Signal sends sig to the server process, e.g. syscall.SIGSTOP and
// syscall.SIGCONT to pause and resume it, or syscall.SIGKILL to crash it.
// It fails when the server is not running.
func (s *RedisServer) Signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return fmt.Errorf("testsvc: redis-server on %s is not running", s.Addr())
	}
	return s.cmd.Process.Signal(sig)
}

func (s *RedisServer) runningLocked() bool {
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

// startLocked starts a process and waits for PING; on failure the process is
// gone when it returns.
func (s *RedisServer) startLocked() error {
	argv := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", s.dir,
	}
	argv = append(argv, s.args...)
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, argv...)
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

	deadline := time.Now().Add(redisStartTimeout)
	for {
		if pingRedis(s.Addr(), 200*time.Millisecond) == nil {
			// Another redis on this port would answer too: make sure ours is alive.
			select {
			case <-done:
			default:
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server exited (%v); log:\n%s", cmd.ProcessState, tail(s.log, 2000))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stopLocked()
			return fmt.Errorf("no PONG within %v; log:\n%s", redisStartTimeout, tail(s.log, 2000))
		}
	}
}

func (s *RedisServer) stopLocked() {
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
