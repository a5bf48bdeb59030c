package fencetest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/lock"
)

// The pause drill's timing.
const (
	drillTTL   = time.Second     // the paused holder's lease
	drillPause = 3 * time.Second // how long it stays stopped
)

// Drill runs the pause drill on target: a child process takes a lock with a
// 1 s TTL, writes, and is stopped (SIGSTOP) for 3 s. Meanwhile this process
// acquires the lock, with a higher token, and writes. The child is resumed
// (SIGCONT) and writes with its old token. Drill fails the test unless that
// write is refused with fence.ErrStale, the record holds the second writer's
// value and token, and the child's Lease.Done() had closed (with
// lock.ErrLeaseLost) before it wrote. config is passed to target.Open, here
// and in the child.
func Drill(t *testing.T, target Target, config string) {
	conn := open(t, target, config)
	key := "drill-" + randHex(6)

	c := startChild(t, target, config, "drill", key)
	first, err := strconv.ParseUint(c.Expect(t, "held ", 30*time.Second, nil), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	c.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	t.Logf("child holds %q with token %d and is stopped", key, first)

	ctx := t.Context()
	lease, err := conn.Locker.Acquire(ctx, key, lock.WithWait(drillPause))
	if err != nil {
		t.Fatalf("lock of a stopped holder not free after its TTL: %v", err)
	}
	defer lease.Release(context.WithoutCancel(ctx))
	if lease.Token() <= first {
		t.Fatalf("second holder's token %d <= first's %d", lease.Token(), first)
	}
	t.Logf("second holder acquired %v after the stop, token %d", time.Since(stopped).Round(time.Millisecond), lease.Token())
	if err := conn.Register.Write(ctx, lease, key, "second"); err != nil {
		t.Fatalf("second holder's write: %v", err)
	}

	time.Sleep(time.Until(stopped.Add(drillPause)))
	c.Signal(syscall.SIGCONT)
	if _, err := fmt.Fprintln(c.In, "write"); err != nil {
		t.Fatal(err)
	}
	report := c.Expect(t, "result ", 30*time.Second, nil)
	t.Logf("first holder after resuming: %s", report)
	fields := map[string]string{}
	for _, f := range strings.Fields(report) {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	if fields["write"] != "stale" {
		t.Errorf("old holder's write with token %d was not refused as stale: %s", first, fields["write"])
	}
	if fields["done"] != "closed" {
		t.Errorf("old holder's Lease.Done() had not closed when it wrote")
	}
	if fields["lost"] != "true" {
		t.Errorf("old holder's Lease.Err() does not wrap lock.ErrLeaseLost")
	}
	v, tok, err := conn.Register.Read(ctx, key)
	if err != nil || v != "second" || tok != lease.Token() {
		t.Errorf("record holds (%q, %d, %v), want the second writer's (%q, %d)", v, tok, err, "second", lease.Token())
	}
	c.In.Close()
	if err := c.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
}

// drillChild is the first holder.
func drillChild(ctx context.Context, conn *Conn, key string) int {
	lease, err := conn.Locker.Acquire(ctx, key, lock.WithTTL(drillTTL))
	if err != nil {
		fmt.Fprintln(os.Stderr, "drill child: acquire:", err)
		return 2
	}
	if err := conn.Register.Write(ctx, lease, key, "first"); err != nil {
		fmt.Fprintln(os.Stderr, "drill child: first write:", err)
		return 2
	}
	fmt.Printf("held %d\n", lease.Token())
	// Stopped around here; resumed, the parent tells us to write.
	if line, _ := bufio.NewReader(os.Stdin).ReadString('\n'); strings.TrimSpace(line) != "write" {
		fmt.Fprintf(os.Stderr, "drill child: told %q\n", line)
		return 2
	}
	// The lease's local deadline passed while we were stopped: its watchdog
	// closes Done as soon as the runtime runs again. Give it a moment, as
	// any goroutine of ours would have, then write like a holder that did
	// not look: with the token alone.
	done := "open"
	select {
	case <-lease.Done():
		done = "closed"
	case <-time.After(drillTTL):
	}
	werr := conn.Register.Write(ctx, fence.Token(lease.Token()), key, "first-late")
	write := "applied"
	switch {
	case errors.Is(werr, fence.ErrStale):
		write = "stale"
	case werr != nil:
		write = "error:" + strings.ReplaceAll(werr.Error(), " ", "_")
	}
	fmt.Printf("result write=%s done=%s lost=%t\n", write, done, errors.Is(lease.Err(), lock.ErrLeaseLost))
	return 0
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
