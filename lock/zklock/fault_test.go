package zklock_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

const childEnv = "ZKLOCK_TEST_CHILD_SERVER"

// TestChildHolder is the child process of TestFrozenHolder: it takes the lock
// with a 1 s session, prints "held <token>", waits for Done and prints
// "lost <err>". It does nothing in a normal run.
func TestChildHolder(t *testing.T) {
	ep := os.Getenv(childEnv)
	if ep == "" {
		t.Skip("child process of TestFrozenHolder only")
	}
	ctx := context.Background()
	l, err := zklock.New(ctx, []string{ep}, zklock.WithSessionTimeout(time.Second))
	if err != nil {
		fmt.Println("error", err)
		return
	}
	lease, err := l.Acquire(ctx, "frozen", lock.WithTTL(time.Second))
	if err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println("held", lease.Token())
	<-lease.Done()
	fmt.Println("lost", lease.Err())
	time.Sleep(time.Minute) // until the parent kills us
}

// TestFrozenHolder freezes a holder process (SIGSTOP) past its session
// timeout: the server expires its session and deletes its node, another
// Locker takes the lock with a higher token, and the holder, continued,
// reports its lease lost (CURATOR-206/-604: Curator's holder is never told).
func TestFrozenHolder(t *testing.T) {
	srv := testsvc.StartZooKeeper(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildHolder$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"="+srv.Endpoint())
	holder := startChild(t, "child", cmd, 0)
	first := holder.next("held <token>", 30*time.Second)
	tok, ok := strings.CutPrefix(first, "held ")
	if !ok {
		t.Fatalf("child: %q", first)
	}
	childToken, _ := strconv.ParseUint(tok, 10, 64)

	ctx := t.Context()
	other := newLocker(t, srv, zklock.WithSessionTimeout(5*time.Second))
	if _, err := other.Acquire(ctx, "frozen", lock.WithTTL(time.Second), lock.WithWait(0)); err == nil {
		t.Fatal("took the lock while the child held it")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	lease, err := other.Acquire(ctx, "frozen", lock.WithTTL(time.Second), lock.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("lock not free after the holder froze: %v", err)
	}
	t.Logf("acquired %v after the holder froze", time.Since(frozen))
	if lease.Token() <= childToken {
		t.Fatalf("token %d <= frozen holder's %d", lease.Token(), childToken)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lost := holder.next("lost <err>", 5*time.Second)
	if !strings.HasPrefix(lost, "lost ") || !strings.Contains(lost, lock.ErrLeaseLost.Error()) {
		t.Fatalf("child after SIGCONT: %q, want its lease lost", lost)
	}
	// The holder's node is gone; ours is intact.
	if _, err := other.Acquire(ctx, "frozen", lock.WithTTL(time.Second), lock.WithWait(0)); err == nil {
		t.Fatal("lock free while we hold it")
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
