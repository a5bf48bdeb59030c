package testsvc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is one server binary run as a child of the test, so the test can
// stop, pause, crash and restart it on the same ports. RedisServer,
// EtcdServer and ZooKeeperServer embed it; its exported methods are theirs.
type process struct {
	t       testing.TB
	name    string           // for messages: "redis-server", "etcd", ...
	dir     string           // working directory
	log     string           // stdout and stderr, shown when a start fails
	timeout time.Duration    // how long a start waits for ready
	command func() *exec.Cmd // the command line of one start
	ready   func() bool      // whether the server answers

	mu   sync.Mutex
	cmd  *exec.Cmd     // guarded by mu
	done chan struct{} // closed when cmd has exited; guarded by mu
}

// Pid returns the process id of the running server, or 0 when it is stopped.
func (p *process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Stop ends the server with SIGTERM (a paused server is continued so it can
// exit) and waits until the process is gone; after 10 s it is killed.
// Stopping a stopped server does nothing.
func (p *process) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

// Start starts the server again on the same ports, after Stop or after the
// process died (say, from Signal(syscall.SIGKILL)), and waits until it
// answers. Starting a running server does nothing.
func (p *process) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return
	}
	var err error
	// A port may still be held for a moment by the old process's sockets;
	// retry briefly.
	for i := range 20 {
		if err = p.startLocked(); err == nil {
			return
		}
		time.Sleep(time.Duration(i+1) * 25 * time.Millisecond)
	}
	p.t.Fatalf("testsvc: restart %s: %v", p.name, err)
}

// Restart stops the server and starts it again on the same ports.
func (p *process) Restart() {
	p.t.Helper()
	p.Stop()
	p.Start()
}

// Signal sends sig to the server process, e.g. syscall.SIGSTOP and
// syscall.SIGCONT to pause and resume it, or syscall.SIGKILL to crash it.
// It fails when the server is not running.
func (p *process) Signal(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return fmt.Errorf("testsvc: %s is not running", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// firstStart is one attempt of the Start* functions, which pick new ports
// when it fails.
func (p *process) firstStart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked()
}

// startOnFreePorts is the first start of a single server: a port that was
// free a moment ago can be taken by the time the server binds it, so it
// tries up to tries times, each with fresh free ports of 127.0.0.1 stored
// in ports (reserved while the server may use them) and after prepare, if
// not nil, has readied the try (written a configuration with the ports,
// removed what a failed try left). t.Cleanup stops the server and gives the
// ports back. It fails p.t when no try started the server.
func (p *process) startOnFreePorts(tries int, prepare func(), ports ...*int) {
	p.t.Helper()
	release := func() {
		for _, port := range ports {
			releasePort(*port)
		}
	}
	p.t.Cleanup(func() {
		p.Stop()
		release()
	})
	var lastErr error
	for range tries {
		for _, port := range ports {
			*port = FreePort(p.t)
			reservePort(*port)
		}
		if prepare != nil {
			prepare()
		}
		if lastErr = p.firstStart(); lastErr == nil {
			return
		}
		release()
	}
	p.t.Fatalf("testsvc: start %s: %v", p.name, lastErr)
}

func (p *process) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// startLocked starts a process and waits until it is ready; on failure the
// process is gone when it returns.
func (p *process) startLocked() error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := p.command()
	cmd.Dir = p.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done

	deadline := time.Now().Add(p.timeout)
	for {
		if p.ready() {
			// Another server on this port would answer too: make sure ours
			// is alive.
			select {
			case <-done:
			default:
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited (%v); log:\n%s", p.name, cmd.ProcessState, tail(p.log, 2000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stopLocked()
			return fmt.Errorf("%s not ready within %v; log:\n%s", p.name, p.timeout, tail(p.log, 2000))
		}
	}
}

func (p *process) stopLocked() {
	if !p.runningLocked() {
		return
	}
	terminate(p.cmd.Process)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startTogether starts procs, the members of a cluster named what, at once,
// as a cluster needs (no member is ready before a quorum runs), trying up to
// three times: before each try, prepare picks fresh ports and writes the
// configuration; after a failed one, every process is stopped, its data
// (data in its directory) removed and release gives back the try's ports.
// t.Cleanup kills every member and calls release: the data is thrown away,
// so no member waits for a graceful shutdown, which in a cluster waits on
// the others. label names process i in the error that fails t when no try
// started them all.
func startTogether(t testing.TB, what string, procs []*process, label func(i int) string, prepare, release func()) {
	t.Helper()
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Signal(syscall.SIGKILL)
			p.Stop()
		}
		release()
	})
	var lastErr error
	for range 3 {
		prepare()
		errs := make([]error, len(procs))
		var wg sync.WaitGroup
		for i, p := range procs {
			wg.Go(func() { errs[i] = p.firstStart() })
		}
		wg.Wait()
		lastErr = nil
		for i, err := range errs {
			if err != nil {
				lastErr = fmt.Errorf("%s: %w", label(i), err)
				break
			}
		}
		if lastErr == nil {
			return
		}
		for _, p := range procs {
			p.Stop()
			_ = os.RemoveAll(filepath.Join(p.dir, "data"))
		}
		release()
	}
	t.Fatalf("testsvc: start %s: %v", what, lastErr)
}
