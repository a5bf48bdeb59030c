package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestRunPermitsAtMostN starts 8 "latchkey run --permits 2" processes at
// once on each backend; each command counts the commands inside (a marker
// file each) on entering and records the count: it must never pass 2.
func TestRunPermitsAtMostN(t *testing.T) {
	t.Parallel()
	onFaultBackends(t, func(t *testing.T, dir, url string) {
		if err := os.Mkdir(filepath.Join(dir, "inside"), 0o755); err != nil {
			t.Fatal(err)
		}
		const script = `touch inside/$$; ls inside | wc -l >> counts; sleep 0.1; rm inside/$$`
		key := testsvc.KeyPrefix(t) + "report"
		const n = 8
		runAll(t, dir, slices.Repeat([][]string{{"--permits", "2", "--key", key, "--backend", url, "--", "sh", "-c", script}}, n)...)
		b, _ := os.ReadFile(filepath.Join(dir, "counts"))
		counts := strings.Fields(string(b))
		if len(counts) != n {
			t.Fatalf("%d commands ran, want %d", len(counts), n)
		}
		most := 0
		for _, c := range counts {
			k, _ := strconv.Atoi(c)
			most = max(most, k)
		}
		if most > 2 {
			t.Fatalf("%d commands ran at once under --permits 2 (counts %v)", most, counts)
		}
	})
}

func TestRunPermitsExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	holder, out := runHolder(t, dir, "--permits", "1", "--key", "busy", "--backend", url)
	checkExits(t, dir, []exitCase{
		{"all permits held", []string{"--permits", "1", "--key", "busy", "--wait", "0", "--backend", url, "--", "true"}, exitNotAcquired},
		{"another N", []string{"--permits", "2", "--key", "busy", "--wait", "0", "--backend", url, "--", "true"}, exitUsage},
		{"zero permits", []string{"--permits", "0", "--key", "k", "--backend", url, "--", "true"}, exitUsage},
		{"negative permits", []string{"--permits", "-1", "--key", "k", "--backend", url, "--", "true"}, exitUsage},
		{"command's own code", []string{"--permits", "3", "--key", "k", "--backend", url, "--", "sh", "-c", "exit 7"}, 7},
		{"token and key in the environment", []string{"--permits", "3", "--key", "k", "--backend", url, "--",
			"sh", "-c", `[ "$LATCHKEY_LOCK_KEY" = k ] && [ "$LATCHKEY_FENCING_TOKEN" -gt 0 ]`}, 0},
		{"redlock has no semaphores", []string{"--permits", "2", "--key", "k", "--backend", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--", "true"}, exitUsage},
	})
	_ = holder.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, holder); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("holder exit %d after SIGTERM: %s", code, out)
	}
}

// TestSemaphoreShow checks the operator's view of a semaphore held by a
// "latchkey run --permits".
func TestSemaphoreShow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	holder, _ := runHolder(t, dir, "--permits", "3", "--key", "jobs", "--backend", url)
	code, stdout, stderr := latchkey(t, "semaphore", "show", "--backend", url, "jobs")
	if code != exitOK {
		t.Fatalf("semaphore show: exit %d: %s", code, stderr)
	}
	for _, want := range []string{`name:`, `"jobs"`, `3, 1 held by 1 holder(s)`, "HOLDER", "TOKEN"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("semaphore show lacks %q:\n%s", want, stdout)
		}
	}
	if code, stdout, stderr := latchkey(t, "semaphore", "show", "--json", "--backend", url, "jobs"); code != exitOK || !strings.Contains(stdout, `"permits": 3`) {
		t.Fatalf("semaphore show --json: exit %d: %s%s", code, stdout, stderr)
	}
	_ = holder.Process.Signal(syscall.SIGTERM)
	exitCode(t, holder)
	if code, stdout, _ := latchkey(t, "semaphore", "show", "--backend", url, "jobs"); code != exitNotFound {
		t.Fatalf("semaphore show of a free semaphore: exit %d, want %d: %s", code, exitNotFound, stdout)
	}
	if code, _, _ := latchkey(t, "semaphore", "show", "--backend", url, ""); code != exitUsage {
		t.Fatalf("semaphore show of an empty name: exit %d, want %d", code, exitUsage)
	}
}
