package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// runProc starts "latchkey run args..." as a separate process (this test
// binary acting as the command) in dir.
func runProc(t *testing.T, dir string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return cliProc(t, dir, "run", args...)
}

// cliProc starts "latchkey command args..." as a separate process in dir,
// with its output in the returned buffer, killed at the test's end.
func cliProc(t *testing.T, dir, command string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{command}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, &out
}

// runHangs is how long a test waits for a latchkey run before it calls it
// hung: a failure timeout, not a measure of speed. Twenty race-built
// processes taking one lock in turn on a loaded 2-core machine have taken
// over a minute together.
const runHangs = 3 * time.Minute

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(runHangs):
		t.Fatal("latchkey run did not end")
		return -1
	}
}

func sqliteURL(dir string) string { return "sqlite://" + filepath.Join(dir, "locks.db") }

// runAll starts a "latchkey run" in dir for each of runs at once and waits
// for them all: each must exit 0.
func runAll(t *testing.T, dir string, runs ...[]string) {
	t.Helper()
	var wg sync.WaitGroup
	for i, args := range runs {
		cmd, out := runProc(t, dir, args...)
		wg.Go(func() {
			if code := exitCode(t, cmd); code != 0 {
				t.Errorf("run %d %q: exit %d: %s", i, args, code, out)
			}
		})
	}
	wg.Wait()
}

// runHolder starts "latchkey run args..." in dir with a command that
// touches dir/started and sleeps, and returns once the command runs.
func runHolder(t *testing.T, dir string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	holder, out := runProc(t, dir, append(args, "--", "sh", "-c", "touch started; sleep 30")...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			return holder, out
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder never started: %s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An exitCase is a "latchkey run" and the exit status it must end with.
type exitCase struct {
	name string
	args []string
	want int
}

// checkExits runs each case in dir as a subtest.
func checkExits(t *testing.T, dir string, cases []exitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd, out := runProc(t, dir, tc.args...)
			if got := exitCode(t, cmd); got != tc.want {
				t.Fatalf("exit %d, want %d: %s", got, tc.want, out)
			}
		})
	}
}

// TestRunExcludes starts 20 "latchkey run" processes at once, each running a
// shell that increments a number in a file with a pause between read and
// write and flags any overlap: the count must end exact, with no overlap
// and tokens rising in the order the commands ran.
func TestRunExcludes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "n"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const script = `mkdir inside 2>/dev/null || echo overlap >> overlaps
n=$(cat n); sleep 0.02; echo $((n+1)) > n
echo "$LATCHKEY_FENCING_TOKEN" >> tokens
rmdir inside`
	const n = 20
	runAll(t, dir, slices.Repeat([][]string{{"--key", "cron:nightly", "--backend", sqliteURL(dir), "--", "sh", "-c", script}}, n)...)
	if b, err := os.ReadFile(filepath.Join(dir, "overlaps")); err == nil {
		t.Fatalf("commands overlapped: %s", b)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "n"))
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(n) {
		t.Fatalf("counter = %s, want %d: updates were lost", got, n)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "tokens"))
	tokens := strings.Fields(string(b))
	if len(tokens) != n {
		t.Fatalf("%d tokens recorded, want %d", len(tokens), n)
	}
	var last uint64
	for _, s := range tokens {
		tok, err := strconv.ParseUint(s, 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("tokens not strictly increasing in run order: %v", tokens)
		}
		last = tok
	}
}

func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	checkExits(t, dir, []exitCase{
		{"success", []string{"--key", "k", "--backend", url, "--", "true"}, 0},
		{"command's own code", []string{"--key", "k", "--backend", url, "--", "sh", "-c", "exit 7"}, 7},
		{"killed by a signal", []string{"--key", "k", "--backend", url, "--", "sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"command not found", []string{"--key", "k", "--backend", url, "--", "/nonexistent/cmd"}, exitNoCommand},
		{"no key", []string{"--backend", url, "--", "true"}, exitUsage},
		{"no command", []string{"--key", "k", "--backend", url}, exitUsage},
		{"bad TTL", []string{"--key", "k", "--ttl", "1ms", "--backend", url, "--", "true"}, exitUsage},
		{"bad backend URL", []string{"--key", "k", "--backend", "nosuch://x", "--", "true"}, exitUsage},
		{"backend down", []string{"--key", "k", "--backend", "redis://127.0.0.1:1/0?dial_timeout=200ms", "--", "true"}, exitUnavailable},
	})
}

func openLocker(t *testing.T, url string) lockurl.Locker {
	t.Helper()
	l, err := lockurl.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// openRW opens the read-write locks at url for the test.
func openRW(t *testing.T, url string) *lockurl.RWLocker {
	t.Helper()
	l, err := lockurl.OpenRW(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestRunNotAcquired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	held, err := openLocker(t, sqliteURL(dir)).Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	for _, wait := range []string{"0", "300ms"} {
		cmd, out := runProc(t, dir, "--key", "k", "--wait", wait, "--backend", sqliteURL(dir), "--", "touch", "ran")
		if got := exitCode(t, cmd); got != exitNotAcquired {
			t.Fatalf("--wait %s: exit %d, want %d: %s", wait, got, exitNotAcquired, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Fatalf("--wait %s: the command ran without the lock", wait)
		}
	}
}

// TestRunStopsCommandOnLostLease takes the lock away behind a running
// command: latchkey must stop it (SIGTERM) and exit 76.
func TestRunStopsCommandOnLostLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, out := runProc(t, dir, "--key", "k", "--ttl", "300ms", "--backend", sqliteURL(dir), "--",
		"sh", "-c", `trap 'echo stopped > stopped; exit 0' TERM; touch started; while :; do sleep 0.05; done`)
	waitFile(t, filepath.Join(dir, "started"))
	db := testsvc.OpenDB(t, "sqlite", backendurl.SQLiteDSN(filepath.Join(dir, "locks.db")), testsvc.MaxOpenConns(0))
	if _, err := db.Exec(`DELETE FROM latchkey_locks WHERE key = 'k'`); err != nil {
		t.Fatal(err)
	}
	if got := exitCode(t, cmd); got != exitLeaseLost {
		t.Fatalf("exit %d, want %d: %s", got, exitLeaseLost, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "stopped")); err != nil {
		t.Fatalf("the command was not sent SIGTERM: %s", out)
	}
	if !strings.Contains(out.String(), lock.ErrLeaseLost.Error()) {
		t.Fatalf("no word of the lost lease: %s", out)
	}
}

// TestRunForwardsSignals sends SIGTERM to latchkey: the command gets it,
// decides how to end, its status is reported, and the lock is released.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, out := runProc(t, dir, "--key", "k", "--backend", sqliteURL(dir), "--",
		"sh", "-c", `trap 'echo got-term > got; exit 3' TERM; touch started; while :; do sleep 0.05; done`)
	waitFile(t, filepath.Join(dir, "started"))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := exitCode(t, cmd); got != 3 {
		t.Fatalf("exit %d, want the command's 3: %s", got, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "got")); err != nil {
		t.Fatalf("SIGTERM not forwarded to the command: %s", out)
	}
	lease, err := openLocker(t, sqliteURL(dir)).Acquire(t.Context(), "k", lock.WithWait(0))
	if err != nil {
		t.Fatalf("lock not released after the command ended: %v", err)
	}
	_ = lease.Release(t.Context())
}

// waitFile waits up to 30 s for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	waitFor(t, 30*time.Second, path+" to appear", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// TestRunWaitDefault: the help says how long run waits by default in words,
// not as the sentinel duration behind it.
func TestRunWaitDefault(t *testing.T) {
	_, out, _ := latchkey(t, "run", "-h")
	if !strings.Contains(out, "(default forever)") || strings.Contains(out, "-1ns") {
		t.Fatalf("--wait's default is not shown as forever:\n%s", out)
	}
}

// TestWaitFlag: --wait takes a duration of zero or more or "forever"; a
// negative duration is refused.
func TestWaitFlag(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{{"forever", "forever"}, {"0", "0s"}, {"1m30s", "1m30s"}} {
		var w waitFlag
		if err := w.Set(tc.in); err != nil || w.String() != tc.want {
			t.Errorf("Set(%q): %q, %v; want %q", tc.in, w.String(), err, tc.want)
		}
	}
	for _, bad := range []string{"soon", "-1s", "-1ns"} {
		var w waitFlag
		if err := w.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted: %v", bad, w.String())
		}
	}
}

// TestNegativeWaitRefused: "--wait -1s" once waited forever where the
// library refuses a negative wait; every command that takes --wait refuses
// it with a usage error and starts nothing.
func TestNegativeWaitRefused(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	for _, args := range [][]string{
		{"run", "--key", "k", "--wait", "-1s", "--backend", sqliteURL(dir), "--", "touch", ran},
		{"run", "--key", "k", "--permits", "2", "--wait=-1s", "--backend", sqliteURL(dir), "--", "touch", ran},
		{"run", "--key", "k", "--shared", "--wait", "-5m", "--backend", sqliteURL(dir), "--", "touch", ran},
		{"elect", "--key", "k", "--wait", "-1s", "--backend", sqliteURL(dir), "--", "touch", ran},
	} {
		code, _, stderr := latchkey(t, args...)
		if code != exitUsage || !strings.Contains(stderr, "negative") {
			t.Errorf("%q: exit %d, want %d with a word on the negative wait: %s", args, code, exitUsage, stderr)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a command ran despite the refused --wait")
	}
}

// TestRunWarnsLocalLock: a cron job installed on many hosts that forgets
// --backend gets a lock file on each host, so every host runs the job at
// once. run says so on stderr, and says nothing once a backend is named.
func TestRunWarnsLocalLock(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir) // the default lock file goes here
	const warning = "no --backend: the lock is a SQLite file on this host and excludes only commands on this host"
	for _, tc := range []struct {
		name string
		env  string // $LATCHKEY_BACKEND
		args []string
		warn bool
	}{
		{"no backend", "", nil, true},
		{"--backend", "", []string{"--backend", sqliteURL(dir)}, false},
		{"$" + envBackend, sqliteURL(dir), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envBackend, tc.env)
			args := append(append([]string{"run", "--key", "k"}, tc.args...), "--", "true")
			code, _, errOut := latchkey(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := strings.Contains(errOut, warning); got != tc.warn {
				t.Fatalf("warning shown: %v, want %v; stderr:\n%s", got, tc.warn, errOut)
			}
			if tc.warn && strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("warning is more than one line:\n%s", errOut)
			}
		})
	}
}

// TestRunOneNameOneResource: two hosts mid-migration run one job with
// different flags; on the default SQLite file a plain run holds K, and runs
// of K with --permits, --shared and --exclusive are each refused at once
// (exit 75), saying K is held as a lock; none runs its command. ("latchkey
// elect --key K" is the lock's own mode: it waits as any contender.)
func TestRunOneNameOneResource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	holder, out := runHolder(t, dir, "--key", "K", "--backend", url)
	ran := filepath.Join(dir, "ran")
	for _, args := range [][]string{
		{"run", "--key", "K", "--permits", "1", "--wait", "0"},
		{"run", "--key", "K", "--shared", "--wait", "5s"},
		{"run", "--key", "K", "--exclusive"},
	} {
		full := append(append(args, "--backend", url, "--"), "touch", ran)
		code, _, stderr := latchkey(t, full...)
		if code != exitNotAcquired || !strings.Contains(stderr, `"K" is held as a lock`) {
			t.Errorf("%q while a plain run holds K: exit %d, %s; want %d saying K is held as a lock", args, code, stderr, exitNotAcquired)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a command ran while K was held in another mode")
	}
	_ = holder.Process.Signal(syscall.SIGTERM)
	exitCode(t, holder)
	_ = out
}

// TestRunHolderLabel: every "latchkey run" once showed as "(no label)" in
// lock ls; --holder labels it (default: host name and pid).
func TestRunHolderLabel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--holder", "nightly report on db-2"}, `"nightly report on db-2"`},
		{nil, " pid "},
	} {
		key := "label" + strconv.Itoa(len(tc.args))
		args := append(append([]string{"--key", key, "--backend", url}, tc.args...), "--", "sh", "-c", "touch "+key+"; sleep 30")
		cmd, _ := runProc(t, dir, args...)
		waitFile(t, filepath.Join(dir, key))
		code, out, errs := latchkey(t, "lock", "show", key, "--backend", url)
		if code != exitOK || !strings.Contains(out, tc.want) {
			t.Errorf("lock show of a run with %q: exit %d, %s %s; want the holder %s", tc.args, code, out, errs, tc.want)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		exitCode(t, cmd)
	}
}

// TestRunSharedWhereNoReadWriteLocks: --shared on a backend without
// read-write locks is a usage error that says which backends have them,
// not an unknown scheme.
func TestRunSharedWhereNoReadWriteLocks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ backend, says string }{
		{testsvc.MySQLURL(t), "read-write locks need PostgreSQL or SQLite"},
		{"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "Redlock has no read-write locks"},
	} {
		code, _, errb := latchkey(t, "run", "--shared", "--key", "k", "--wait", "0", "--backend", tc.backend, "--", "true")
		if code != exitUsage || !strings.Contains(errb, tc.says) || strings.Contains(errb, "unsupported scheme \"") {
			t.Fatalf("run --shared on %s: exit %d, %q; want %d saying %q", tc.backend, code, errb, exitUsage, tc.says)
		}
	}
}
