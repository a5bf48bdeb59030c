package zklock_test

import (
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

func TestOperator(t *testing.T) {
	srv := startZK(t)
	locktest.RunOperator(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker { return newLocker(t, srv) },
	})
}

// A Python worker's kazoo Lock holds a path: the operator sees kazoo's node
// and identifier as the holder, when it was created, and in a listing.
func TestOperatorSeesKazooHolder(t *testing.T) {
	if err := exec.Command(python, "-c", "import kazoo").Run(); err != nil {
		testsvc.Unavailable(t, "kazoo not importable by %s (apt-get install python3-kazoo): %v", python, err)
	}
	srv := startZK(t)
	ours := newLocker(t, srv, zklock.WithPrefix("/locks"), zklock.WithNodeNames(zklock.KazooNames))
	cmd := exec.Command(python, "-c", kazooScript, srv.Endpoint(), "/locks/shared")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := readLines(out)
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("kazoo said %q, want %q", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("kazoo did not say %q", want)
		}
	}
	expect("held")
	ctx := t.Context()
	info, err := lock.Inspect(ctx, ours, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Holder != "kazoo" || !strings.HasPrefix(info.Entry, "/locks/shared/") ||
		!strings.Contains(info.Entry, "__lock__") || info.Token == 0 || info.Waiters != 0 ||
		time.Since(info.AcquiredAt) > time.Minute || info.TimeLeft != lock.Unknown {
		t.Fatalf("Inspect while kazoo holds = %+v", info)
	}
	page, err := lock.List(ctx, ours, "sh", 10, "")
	if err != nil || len(page.Locks) != 1 || page.Locks[0].Entry != info.Entry {
		t.Fatalf("List = %+v, %v; want kazoo's lock", page, err)
	}
	_, _ = io.WriteString(in, "\n")
	expect("released")
	if info, err := lock.Inspect(ctx, ours, "shared"); err != nil || info.Held {
		t.Fatalf("after kazoo released, Inspect = %+v, %v", info, err)
	}
}
