package etcdlock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// syncBuffer collects a child's output for polling.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An etcdctl is a running etcdctl command.
type etcdctl struct {
	cmd  *exec.Cmd
	out  syncBuffer
	errb syncBuffer
	done chan struct{} // closed when etcdctl has exited
	err  error         // its exit status; set before done is closed
}

// startEtcdctl runs `etcdctl args...` against srv in the background. Its
// cleanup kills etcdctl (SIGKILL) if it is still running and waits for it:
// registered after StartEtcd, it runs before the server stops, because an
// etcdctl lock whose server is gone hangs and ignores SIGTERM
// (SERVICES.md). It calls Unavailable when etcdctl is not on PATH (apt-get
// install etcd-client).
func startEtcdctl(t *testing.T, srv *testsvc.EtcdServer, args ...string) *etcdctl {
	t.Helper()
	bin, err := exec.LookPath("etcdctl")
	if err != nil {
		testsvc.Unavailable(t, "etcdctl not found on PATH (apt-get install etcd-client)")
	}
	cmd := exec.Command(bin, append([]string{"--endpoints", srv.Endpoint()}, args...)...)
	// etcdctl refuses ETCDCTL_* variables that shadow its flags.
	env := []string{"ETCDCTL_API=3"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCDCTL_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	e := &etcdctl{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &e.out, &e.errb
	// A killed etcdctl may leave its sh behind holding the output pipe.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start etcdctl: %v", err)
	}
	go func() {
		e.err = cmd.Wait()
		close(e.done)
	}()
	t.Cleanup(func() {
		select {
		case <-e.done:
		default:
			_ = cmd.Process.Kill()
			<-e.done
		}
	})
	return e
}

// startEtcdctlLock runs `etcdctl lock name -- sh -c script` against srv in
// the background, as startEtcdctl does.
func startEtcdctlLock(t *testing.T, srv *testsvc.EtcdServer, name, script string) *etcdctl {
	t.Helper()
	return startEtcdctl(t, srv, "lock", name, "--", "sh", "-c", script)
}

// waitOutput waits until the output contains s, for at most d.
func (l *etcdctl) waitOutput(s string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(l.out.String(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// wait waits for etcdctl to exit, for at most d, and reports its status.
func (l *etcdctl) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(d):
		t.Fatalf("etcdctl lock still running after %v; output %q, stderr %q", d, l.out.String(), l.errb.String())
	}
	if l.err != nil {
		t.Fatalf("etcdctl lock: %v; output %q, stderr %q", l.err, l.out.String(), l.errb.String())
	}
}

// TestInteropEtcdctl checks mutual exclusion between our Locker and the
// `etcdctl lock` CLI on one name, both ways.
func TestInteropEtcdctl(t *testing.T) {
	srv := testsvc.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
	defer cancel()
	name := "etcdctl-" + testsvc.KeyPrefix(t)
	ours := newLocker(t, newClient(t, srv))

	t.Run("ours holds", func(t *testing.T) {
		lease, err := ours.Acquire(ctx, name, lock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		theirs := startEtcdctlLock(t, srv, name, "echo got")
		if theirs.waitOutput("got", time.Second) {
			t.Fatal("etcdctl lock ran its command while our lease held the lock")
		}
		select {
		case <-theirs.done:
			t.Fatalf("etcdctl lock exited while we held the lock: %v; stderr %q", theirs.err, theirs.errb.String())
		default:
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if !theirs.waitOutput("got", 5*time.Second) {
			t.Fatalf("etcdctl lock did not run its command within 5 s of our Release; stderr %q", theirs.errb.String())
		}
		theirs.wait(t, 5*time.Second)
	})

	t.Run("theirs holds", func(t *testing.T) {
		theirs := startEtcdctlLock(t, srv, name, "echo held; sleep 2")
		if !theirs.waitOutput("held", 5*time.Second) {
			t.Fatalf("etcdctl lock did not get the lock within 5 s; stderr %q", theirs.errb.String())
		}
		heldAt := time.Now()
		if _, err := ours.Acquire(ctx, name, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatalf("try-once Acquire while etcdctl holds = %v, want ErrNotAcquired", err)
		}
		lease, err := ours.Acquire(ctx, name, lock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatalf("waiting Acquire: %v", err)
		}
		if d := time.Since(heldAt); d < 1500*time.Millisecond {
			t.Fatalf("waiting Acquire got the lock %v after etcdctl printed held, before its 2 s command ended", d)
		}
		theirs.wait(t, 5*time.Second)
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
