package idemtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
)

const (
	envCrashKey      = "IDEMTEST_CRASH_KEY"
	envCrashDeadline = "IDEMTEST_CRASH_DEADLINE"
	crashDeadline    = 700 * time.Millisecond
)

// CrashChild lets the test binary act as the process Crash kills. Call it first
// thing in TestMain; open must build the store from the environment that the
// test passed to Crash. In a normal test run it returns at once. In the child
// it claims the key, reports the time it began, and kills itself with SIGKILL
// (os.Process.Kill) before recording anything: a handler process that died
// mid-payment.
func CrashChild(open func() (idem.Store, error)) {
	key := os.Getenv(envCrashKey)
	if key == "" {
		return
	}
	d, err := time.ParseDuration(os.Getenv(envCrashDeadline))
	if err != nil {
		fmt.Fprintln(os.Stderr, "idemtest child:", err)
		os.Exit(2)
	}
	s, err := open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "idemtest child: open store:", err)
		os.Exit(2)
	}
	start := time.Now()
	run, _, err := idem.Begin(context.Background(), s, key, "fp", idem.WithInProgress(d))
	if err != nil || run == nil {
		fmt.Fprintln(os.Stderr, "idemtest child: claim failed:", err)
		os.Exit(2)
	}
	fmt.Printf("claimed %d\n", start.UnixNano())
	_ = os.Stdout.Sync()
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	time.Sleep(time.Hour)
}

// Crash re-executes the test binary (whose TestMain calls CrashChild) with env
// added to its environment. The child claims a key and is killed before it
// records. Crash then retries from 8 goroutines at once and checks that every
// retry is refused as in progress until the in-progress deadline, and that
// after it exactly one retry runs the operation while the others replay its
// result.
func Crash(t *testing.T, s idem.Store, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := UniqueKey(t)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), envCrashKey+"="+key, envCrashDeadline+"="+crashDeadline.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Success() {
		t.Fatalf("child: %v (want it killed); stdout %q stderr %q", err, out, stderr.String())
	}
	ns, perr := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(string(out)), "claimed "), 10, 64)
	if perr != nil {
		t.Fatalf("child did not claim: stdout %q stderr %q (%v)", out, stderr.String(), err)
	}
	claimedAt := time.Unix(0, ns)

	var runs, refused atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				v, err := idem.Do(ctx, s, key, func(context.Context) (string, error) {
					if el := time.Since(claimedAt); el < crashDeadline {
						t.Errorf("retry ran %v after the dead claim, before its %v deadline", el, crashDeadline)
					}
					runs.Add(1)
					return "charged once", nil
				}, idem.WithFingerprint("fp"))
				switch {
				case errors.Is(err, idem.ErrInProgress):
					refused.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				case err != nil:
					t.Error(err)
				case v != "charged once":
					t.Errorf("got %q", v)
				}
				return
			}
		})
	}
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("after the crash the operation ran %d times, want exactly 1", runs.Load())
	}
	if refused.Load() == 0 {
		t.Fatal("no retry saw the dead claim in progress; the test proved nothing")
	}
}
