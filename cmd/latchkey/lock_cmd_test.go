package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/lock"
)

// runLock runs "latchkey lock args..." as latchkey does.
func runLock(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return latchkey(t, append([]string{"lock"}, args...)...)
}

// A payment queue stuck behind a worker's lock: the operator lists it,
// looks at it and breaks it; the worker's lease is lost and the next one
// gets a higher token.
func TestLockCommands(t *testing.T) {
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "locks.db"))
	ctx := t.Context()
	l := openLocker(t, url)
	stuck, err := l.Acquire(ctx, "payments:queue:eu", lock.WithTTL(3*time.Second), lock.WithHolder("worker-7 pid 4242"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "payments:queue:us", lock.WithTTL(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	checkLockListing(t, url, stuck)
	code, out, _ := runLock(t, "show", "--backend", url, "--json", "payments:queue:eu")
	var shown lockJSON
	if code != exitOK || json.Unmarshal([]byte(out), &shown) != nil || !shown.Held || shown.TimeLeftMS == nil || shown.Waiters != nil {
		t.Fatalf("show --json: %d %q", code, out)
	}
	if code, out, _ = runLock(t, "show", "--backend", url, "payments:queue:none"); code != exitNotFound || !strings.Contains(out, "held:") {
		t.Fatalf("show of a free key: %d %q", code, out)
	}
	checkBadLockInput(t, url, stuck)

	if code, _, errs := runLock(t, "break", "--backend", url, "--as", "ana", "payments:queue:eu"); code != exitUsage || !strings.Contains(errs, "add --yes to break") {
		t.Errorf("break without --yes and without a terminal: status %d, %q; want %d asking for --yes to break", code, errs, exitUsage)
	}
	code, out, errs := runLock(t, "break", "--backend", url, "--yes", "--as", "oncall-ana", "--json", "payments:queue:eu")
	var broken brokenJSON
	if code != exitOK || json.Unmarshal([]byte(out), &broken) != nil || broken.Token != stuck.Token() || broken.BrokenBy != "oncall-ana" {
		t.Fatalf("break: %d %q %q", code, out, errs)
	}
	if broken.After == nil || broken.After.Held {
		t.Fatalf("break --json: the state after is %+v, want free (nobody waited)", broken.After)
	}
	waitLost(t, stuck, "the broken holder")
	next, err := l.Acquire(ctx, "payments:queue:eu", lock.WithWait(0))
	if err != nil || next.Token() <= stuck.Token() {
		t.Fatalf("after the break: %v, token %v vs %d", err, next, stuck.Token())
	}
	_ = next.Release(context.Background())
}

// checkLockListing checks that lock ls lists the payment queues' locks at
// url a page at a time, stuck's first, and that its paging hint, pasted as
// shown, reaches the same backend, not the default SQLite file.
func checkLockListing(t *testing.T, url string, stuck *lock.Lease) {
	t.Helper()
	code, out, errs := runLock(t, "ls", "--backend", url, "--prefix", "payments:", "--limit", "1", "--json")
	var page struct {
		Locks  []lockJSON `json:"locks"`
		Cursor string     `json:"cursor"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &page) != nil || len(page.Locks) != 1 || page.Cursor == "" {
		t.Fatalf("ls --limit 1 --json: %d %q %q", code, out, errs)
	}
	if page.Locks[0].Key != "payments:queue:eu" || page.Locks[0].Holder != "worker-7 pid 4242" || page.Locks[0].Token != stuck.Token() {
		t.Fatalf("ls listed %+v", page.Locks[0])
	}
	code, out, _ = runLock(t, "ls", "--backend", url, "--prefix", "payments:", "--limit", "1", "--cursor", page.Cursor)
	if code != exitOK || !strings.Contains(out, "payments:queue:us") || strings.Contains(out, "queue:eu") {
		t.Fatalf("second page: %d %q", code, out)
	}
	code, out, _ = runLock(t, "ls", "--backend", url, "--prefix", "payments:", "--limit", "1")
	hint, ok := strings.CutPrefix(out[strings.Index(out, "more: "):], "more: latchkey lock ")
	if code != exitOK || !ok || !strings.Contains(hint, "--backend "+strconv.Quote(url)) {
		t.Fatalf("paging hint %q lacks --backend %s", out, url)
	}
	args, err := splitQuoted(strings.TrimSpace(hint))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, _ = runLock(t, args...); code != exitOK || !strings.Contains(out, "payments:queue:us") {
		t.Fatalf("the pasted hint %q: %d %q", hint, code, out)
	}
	code, out, _ = runLock(t, "ls", "--backend", url)
	if code != exitOK || !strings.Contains(out, "KEY") || !strings.Contains(out, `"worker-7 pid 4242"`) || strings.Contains(out, "more:") {
		t.Fatalf("ls: %d %q", code, out)
	}
}

// checkBadLockInput checks that bad input gets a distinct status and
// changes nothing: stuck still holds its lock.
func checkBadLockInput(t *testing.T, url string, stuck *lock.Lease) {
	t.Helper()
	for _, args := range [][]string{
		{"show", "--backend", url, ""},
		{"show", "--backend", url, strings.Repeat("k", lock.MaxKeyLen+1)},
		{"show", "--backend", "nosuch://x", "k"},
		{"show", "--backend", url},
		{"ls", "--backend", url, "--limit", "0"},
		{"ls", "--backend", url, "--cursor", "!!"},
		{"break", "--backend", url, "--as", "", "--yes", "payments:queue:eu"},
		{"frobnicate"},
	} {
		if code, _, _ := runLock(t, args...); code != exitUsage {
			t.Errorf("lock %q: status %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, errs := runLock(t, "show", "--backend", "redis://:hunter2@127.0.0.1:1", "k"); code != exitUnavailable || strings.Contains(errs, "hunter2") {
		t.Errorf("backend down: status %d, %q; want %d without the password", code, errs, exitUnavailable)
	}
	if code, _, _ := runLock(t, "break", "--backend", url, "--yes", "--as", "ana", "payments:queue:none"); code != exitNotFound {
		t.Errorf("break of a free key: status %d, want %d", code, exitNotFound)
	}
	select {
	case <-stuck.Done():
		t.Fatal("bad input broke the lock")
	default:
	}
}

// splitQuoted splits a command line of words and Go-quoted strings.
func splitQuoted(line string) ([]string, error) {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, err
			}
			w, _ := strconv.Unquote(q)
			out, line = append(out, w), line[len(q):]
			continue
		}
		w, rest, _ := strings.Cut(line, " ")
		out, line = append(out, w), rest
	}
	return out, nil
}

// TestQuietClients: with Redis down, "latchkey lock ls" prints latchkey's
// one line, not go-redis's own log lines ("redis: … pool.go:…: failed to
// dial after 5 attempts", four of them before latchkey's message).
func TestQuietClients(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "lock", "ls", "--backend", "redis://127.0.0.1:1")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitUnavailable {
		t.Fatalf("exit %d, want %d: %s", code, exitUnavailable, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || strings.Contains(string(out), "pool.go") {
		t.Fatalf("want latchkey's one line, got %d:\n%s", len(lines), out)
	}
}

// TestBreakWithoutUser: in cron or a container $USER is often unset, and
// "lock break --yes" once failed there unless --as was given; it now logs
// the host as who asked.
func TestBreakWithoutUser(t *testing.T) {
	t.Setenv("USER", "")
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "locks.db"))
	l := openLocker(t, url)
	stuck, err := l.Acquire(t.Context(), "nightly", lock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runLock(t, "break", "--backend", url, "--yes", "nightly")
	if code != exitOK {
		t.Fatalf("break --yes without $USER: exit %d: %s %s", code, out, errs)
	}
	host, _ := os.Hostname()
	if !strings.Contains(out+errs, "host "+host) {
		t.Fatalf("the break does not say the host asked: %s %s", out, errs)
	}
	waitLost(t, stuck, "the broken holder")
}

// TestFlagsAfterNames: "lock show KEY --backend URL --json", "lock break KEY
// --yes", "semaphore show NAME --json" and "elect show NAME --json" once
// failed with "give exactly one KEY" although their usage lines put the
// flags after the name; flags now stand before or after names.
func TestFlagsAfterNames(t *testing.T) {
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "locks.db"))
	l := openLocker(t, url)
	if _, err := l.Acquire(t.Context(), "k", lock.WithTTL(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"lock", "show", "k", "--backend", url, "--json"},
		{"lock", "show", "--backend=" + url, "k", "--json"},
		{"semaphore", "show", "jobs", "--backend", url, "--json"},
		{"elect", "show", "k", "--json", "--backend", url},
		{"lock", "break", "k", "--yes", "--as", "ana", "--backend", url},
	} {
		// A free semaphore is "not found" (1): the flags were still read.
		if code, out, errb := latchkey(t, args...); code != exitOK && (args[0] != "semaphore" || code != exitNotFound) {
			t.Errorf("%q: exit %d: %s %s", args, code, out, errb)
		}
	}
	if code, _, errb := runLock(t, "show", "k", "other", "--backend", url); code != exitUsage || !strings.Contains(errb, "exactly one KEY (got 2)") {
		t.Errorf("two keys: exit %d: %s", code, errb)
	}
}

// TestBreakPrintsTheStateAfter: a break prints the holder it broke and the
// lock as it is after: here a waiter's, with a higher token, where it once
// printed only the state from before.
func TestBreakPrintsTheStateAfter(t *testing.T) {
	t.Parallel()
	url := "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "locks.db"))
	l := openLocker(t, url)
	stuck, err := l.Acquire(t.Context(), "nightly", lock.WithTTL(30*time.Second), lock.WithHolder("stuck-host"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lock.Lease, 1)
	go func() {
		next, err := l.Acquire(t.Context(), "nightly", lock.WithTTL(30*time.Second), lock.WithHolder("next-host"), lock.WithWait(time.Minute))
		if err != nil {
			t.Error(err)
		}
		got <- next
	}()
	// Whether the waiter has started waiting or not, it gets the lock
	// only after the break.
	code, out, errs := runLock(t, "break", "--backend", url, "--yes", "--as", "ana", "nightly")
	next := <-got
	if next == nil {
		t.FailNow()
	}
	defer next.Release(context.Background())
	before, after, ok := strings.Cut(out, "now:")
	if code != exitOK || !ok || !strings.Contains(before, "stuck-host") || strings.Contains(before, "next-host") {
		t.Fatalf("break: exit %d, %q %q; want the broken holder, then now:", code, out, errs)
	}
	// The waiter may take the lock before or after the break reads it
	// again: now shows it held by the waiter, or free a moment before.
	if strings.Contains(after, "held") && strings.Contains(after, "yes") &&
		(!strings.Contains(after, "next-host") || !strings.Contains(after, strconv.FormatUint(next.Token(), 10))) {
		t.Fatalf("now: %q, want the waiter next-host with token %d", after, next.Token())
	}
	if next.Token() <= stuck.Token() {
		t.Fatalf("the waiter's token %d is not above the broken %d", next.Token(), stuck.Token())
	}
}
