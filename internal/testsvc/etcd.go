package testsvc

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EtcdServer is a single-member etcd child process owned by one test, for
// tests that stop, pause or restart the server. Its data directory lives in
// t.TempDir() and survives Stop, Start and Restart, so revisions (and with
// them fencing tokens) keep increasing across a restart. All methods are safe
// for concurrent use; Start and Restart report failures with t.Fatalf.
type EtcdServer struct {
	t          testing.TB
	bin        string
	args       []string
	dir        string
	clientPort int
	peerPort   int
	log        string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
}

// etcdStartTimeout bounds how long Start waits for /health. A restart on an
// existing data directory takes about 2 s (SERVICES.md).
const etcdStartTimeout = 20 * time.Second

// StartEtcd starts a private etcd (Debian's etcd-server: `etcd` on PATH) on
// free client and peer ports of 127.0.0.1 with its data directory in
// t.TempDir(), followed by args, waits until /health answers, and stops it in
// t.Cleanup. It calls Unavailable when etcd is not on PATH (apt-get install
// etcd-server etcd-client). The log is etcd.log in the server's directory and
// is shown when it fails to start.
func StartEtcd(t testing.TB, args ...string) *EtcdServer {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		Unavailable(t, "testsvc: etcd not found on PATH (apt-get install etcd-server etcd-client)")
	}
	s := &EtcdServer{t: t, bin: bin, args: args, dir: t.TempDir()}
	s.log = filepath.Join(s.dir, "etcd.log")
	t.Cleanup(func() {
		s.Stop()
		releasePort(s.clientPort)
		releasePort(s.peerPort)
	})
	var lastErr error
	for range 5 {
		s.clientPort, s.peerPort = FreePort(t), FreePort(t)
		reservePort(s.clientPort)
		reservePort(s.peerPort)
		s.mu.Lock()
		lastErr = s.startLocked()
		s.mu.Unlock()
		if lastErr == nil {
			return s
		}
		releasePort(s.clientPort)
		releasePort(s.peerPort)
		// A failed first start may leave a half-initialised member behind.
		_ = os.RemoveAll(filepath.Join(s.dir, "data"))
	}
	t.Fatalf("testsvc: start etcd: %v", lastErr)
	return nil
}

// Endpoint returns the client address, 127.0.0.1:PORT, as etcd's Go client
// takes it in Config.Endpoints. It stays the same across Stop, Start and
// Restart.
func (s *EtcdServer) Endpoint() string {
	return "127.0.0.1:" + strconv.Itoa(s.clientPort)
}

// Pid returns the process id of the running server, or 0 when it is stopped.
func (s *EtcdServer) Pid() int {
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
func (s *EtcdServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// Start starts the server again on the same ports and data directory, after
// Stop or after the process died, and waits until it is healthy. Starting a
// running server does nothing.
func (s *EtcdServer) Start() {
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
	s.t.Fatalf("testsvc: restart etcd on %s: %v", s.Endpoint(), err)
}

// Restart stops the server and starts it again on the same ports and data:
// keys, leases and the revision counter survive.
func (s *EtcdServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

// Signal sends sig to the server process, e.g. syscall.SIGSTOP and
// syscall.SIGCONT to pause and resume it, or syscall.SIGKILL to crash it.
// It fails when the server is not running.
func (s *EtcdServer) Signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return fmt.Errorf("testsvc: etcd on %s is not running", s.Endpoint())
	}
	return s.cmd.Process.Signal(sig)
}

func (s *EtcdServer) runningLocked() bool {
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

// startLocked starts a process and waits for /health; on failure the process
// is gone when it returns.
func (s *EtcdServer) startLocked() error {
	client := "http://" + s.Endpoint()
	peer := "http://127.0.0.1:" + strconv.Itoa(s.peerPort)
	argv := []string{
		"--name", "t1",
		"--data-dir", filepath.Join(s.dir, "data"),
		"--logger=zap",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "t1=" + peer,
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

	hc := &http.Client{Timeout: 500 * time.Millisecond}
	deadline := time.Now().Add(etcdStartTimeout)
	for {
		if etcdHealthy(hc, client) {
			select {
			case <-done: // another etcd on this port answered
			default:
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("etcd exited (%v); log:\n%s", cmd.ProcessState, tail(s.log, 2000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stopLocked()
			return fmt.Errorf("not healthy within %v; log:\n%s", etcdStartTimeout, tail(s.log, 2000))
		}
	}
}

// etcdHealthy reports whether GET /health answers {"health":"true"}.
func etcdHealthy(hc *http.Client, base string) bool {
	resp, err := hc.Get(base + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var b [64]byte
	n, _ := resp.Body.Read(b[:])
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b[:n]), `"true"`)
}

func (s *EtcdServer) stopLocked() {
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

// etcdDial checks that the client port accepts TCP, for tests.
func etcdDial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, checkTimeout)
	if err != nil {
		return err
	}
	return c.Close()
}
