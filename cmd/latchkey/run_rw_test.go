package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/latchkey-go/latchkey/lock"
)

// TestRunSharedAndExclusive: four --shared runs hold the key together (each
// waits until all four are inside), then --shared and --exclusive runs
// started at once never find an --exclusive one beside anyone.
func TestRunSharedAndExclusive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	if err := os.Mkdir(filepath.Join(dir, "readers"), 0o755); err != nil {
		t.Fatal(err)
	}
	// run runs, at once, a command of each pair of mode and script.
	run := func(args ...string) {
		var runs [][]string
		for i := 0; i < len(args); i += 2 {
			runs = append(runs, []string{"--key", "prices", args[i], "--backend", url, "--", "sh", "-c", args[i+1]})
		}
		runAll(t, dir, runs...)
	}
	const together = `touch readers/$$; i=0
while [ "$(ls readers | wc -l)" -lt 4 ]; do i=$((i+1)); [ $i -gt 400 ] && exit 9; sleep 0.05; done
sleep 0.2; rm readers/$$`
	run("--shared", together, "--shared", together, "--shared", together, "--shared", together)

	const reader = `touch readers/$$; [ -e writer ] && echo "reader beside a writer" >> overlaps
sleep 0.05; rm readers/$$`
	const writer = `mkdir writer || echo "two writers" >> overlaps
[ -n "$(ls readers)" ] && echo "writer beside a reader" >> overlaps
sleep 0.05; rmdir writer`
	var args []string
	for i := range 12 {
		if i%3 == 0 {
			args = append(args, "--exclusive", writer)
		} else {
			args = append(args, "--shared", reader)
		}
	}
	run(args...)
	if b, err := os.ReadFile(filepath.Join(dir, "overlaps")); err == nil {
		t.Fatalf("runs overlapped:\n%s", b)
	}
}

func TestRunSharedExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	r, err := openRW(t, url).RLock(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(context.Background())
	cases := []exitCase{
		{"shared beside a reader", []string{"--shared", "--wait", "0"}, 0},
		{"exclusive beside a reader", []string{"--exclusive", "--wait", "0"}, exitNotAcquired},
		{"exclusive out of time", []string{"--exclusive", "--wait", "300ms"}, exitNotAcquired},
		{"both modes", []string{"--shared", "--exclusive"}, exitUsage},
		{"a mode and permits", []string{"--shared", "--permits", "2"}, exitUsage},
	}
	for i, tc := range cases {
		cases[i].args = append(append([]string{"--key", "k", "--backend", url}, tc.args...), "--", "true")
	}
	cases = append(cases, exitCase{"--shared on MySQL", []string{"--key", "k", "--shared", "--backend", "mysql://root@127.0.0.1:3306/test", "--", "true"}, exitUsage})
	checkExits(t, dir, cases)
}

// TestLockShowRW: "latchkey lock show --rw" shows the readers of a key, with
// their labels and tokens, and says "free" (exit 1) once they left.
func TestLockShowRW(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := sqliteURL(dir)
	r, err := openRW(t, url).RLock(t.Context(), "prices", lock.WithHolder("report job"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runLock(t, "show", "--rw", "--backend", url, "prices")
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	for _, want := range []string{"shared by 1", `"report job", token ` + strconv.FormatUint(r.Token(), 10), "writers waiting"} {
		if !strings.Contains(out, want) {
			t.Fatalf("show --rw says:\n%s\nwant %q in it", out, want)
		}
	}
	if code, out, _ := runLock(t, "show", "--rw", "--json", "--backend", url, "prices"); code != exitOK || !strings.Contains(out, `"mode": "shared"`) {
		t.Fatalf("show --rw --json: exit %d: %s", code, out)
	}
	_ = r.Release(t.Context())
	if code, out, _ := runLock(t, "show", "--rw", "--backend", url, "prices"); code != exitNotFound {
		t.Fatalf("show --rw of a free key: exit %d, want %d: %s", code, exitNotFound, out)
	}
}
