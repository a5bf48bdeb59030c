package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// TestOneViewOfEveryKind: with a read-write lock held by two readers, a
// semaphore's permits and an election on one backend, lock ls lists all
// three with their kinds (it once listed only the election), lock show
// shows each as it is held, and lock break ends one reader (by label), then
// a semaphore holder (by token), each holder learning it by Done, printing
// the state after. On MySQL, which has no read-write locks, the rest holds.
func TestOneViewOfEveryKind(t *testing.T) {
	t.Parallel()
	backends := map[string]string{
		"sqlite":    "sqlite://" + filepath.ToSlash(filepath.Join(t.TempDir(), "locks.db")),
		"redis":     "redis://" + testsvc.RedisAddr(t) + "/0",
		"postgres":  testsvc.PostgresURL(t),
		"mysql":     testsvc.MySQLURL(t),
		"etcd":      "etcd://" + testsvc.StartEtcd(t).Endpoint(),
		"zookeeper": "zk://" + testsvc.StartZooKeeper(t).Endpoint() + "/latchkey?session=4s",
	}
	for name, url := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			oneViewOfEveryKind(t, url, name != "mysql")
		})
	}
}

// oneViewOfEveryKind is TestOneViewOfEveryKind on the backend at url;
// hasRW says whether it has read-write locks.
func oneViewOfEveryKind(t *testing.T, url string, hasRW bool) {
	ctx := t.Context()
	p := "view-" + testsvc.KeyPrefix(t)
	opts := []lock.Option{lock.WithTTL(3 * time.Second)}
	var reader *lock.Lease
	if hasRW {
		reader = holdTwoReaders(t, url, p+":prices", opts)
	}
	sems, err := lockurl.OpenSemaphores(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer sems.Close()
	sm, err := sems.Semaphore(p+":exports", 3)
	if err != nil {
		t.Fatal(err)
	}
	job1, err := sm.AcquireN(ctx, 2, append(opts, lock.WithHolder("job-1"))...)
	if err != nil {
		t.Fatal(err)
	}
	job2, err := sm.Acquire(ctx, append(opts, lock.WithHolder("job-2"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer job2.Release(context.Background())
	locker := openLocker(t, url)
	term, err := locker.Acquire(ctx, p+":relay", append(opts, lock.WithHolder("relay-host"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Release(context.Background())

	checkEveryKindListed(t, url, p, hasRW)
	code, out, _ := latchkey(t, "lock", "show", p+":exports", "--backend", url)
	if code != exitOK || !strings.Contains(out, "3 held by 2 holder(s)") {
		t.Fatalf("lock show of the semaphore: exit %d, %s", code, out)
	}
	if hasRW {
		breakOneReader(t, url, p+":prices", reader)
	}
	tok := strconv.FormatUint(job1.Token(), 10)
	code, out, errb := latchkey(t, "lock", "break", p+":exports", "--token", tok, "--yes", "--as", "ana", "--json", "--backend", url)
	var broken brokenHoldersJSON
	if code != exitOK || json.Unmarshal([]byte(out), &broken) != nil || broken.Kind != kindSemaphore || len(broken.Broken) != 1 || broken.Broken[0].Token != job1.Token() || broken.After == nil {
		t.Fatalf("lock break --token of job-1: exit %d, %s%s", code, out, errb)
	}
	waitLost(t, job1.Lease, "the broken semaphore holder")
	next, err := sm.AcquireN(ctx, 2, append(opts, lock.WithWait(5*time.Second))...)
	if err != nil || next.Token() <= job1.Token() {
		t.Fatalf("after the break: %v, token %v vs %d", err, next, job1.Token())
	}
	_ = next.Release(context.Background())
}

// holdTwoReaders read-locks key at url as reader-a and reader-b for the
// test, and returns reader-a's lease.
func holdTwoReaders(t *testing.T, url, key string, opts []lock.Option) *lock.Lease {
	t.Helper()
	ctx := t.Context()
	rw := openRW(t, url)
	a, err := rw.RLock(ctx, key, append(opts, lock.WithHolder("reader-a"))...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := rw.RLock(ctx, key, append(opts, lock.WithHolder("reader-b"))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Release(context.Background()) })
	return a
}

// checkEveryKindListed checks that lock ls lists, under prefix p, the lock,
// the semaphore's holders and, with hasRW, the readers, each with its kind,
// and that --kind lists one kind alone.
func checkEveryKindListed(t *testing.T, url, p string, hasRW bool) {
	t.Helper()
	code, out, errb := listAll(t, "lock", "ls", "--prefix", p, "--backend", url)
	want := []string{"lock ", `"relay-host"`, "semaphore 2/3", `"job-1"`, "semaphore 1/3", `"job-2"`}
	if hasRW {
		want = append(want, "rw reader", `"reader-a"`, `"reader-b"`)
	}
	for _, w := range want {
		if code != exitOK || !strings.Contains(out, w) {
			t.Fatalf("lock ls: exit %d, want %q in:\n%s%s", code, w, out, errb)
		}
	}
	var all listingJSON
	for cursor, pages := "", 0; pages == 0 || cursor != ""; pages++ {
		if pages == maxListPages {
			t.Fatalf("lock ls --kind semaphore --json: more than %d pages", maxListPages)
		}
		args := []string{"lock", "ls", "--prefix", p, "--kind", "semaphore", "--json", "--backend", url}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		code, out, _ = latchkey(t, args...)
		var page listingJSON
		if code != exitOK || json.Unmarshal([]byte(out), &page) != nil {
			t.Fatalf("lock ls --kind semaphore --json: exit %d, %s", code, out)
		}
		all.Semaphores, all.Locks, all.RWLocks = append(all.Semaphores, page.Semaphores...), append(all.Locks, page.Locks...), append(all.RWLocks, page.RWLocks...)
		cursor = page.Cursor
	}
	if len(all.Semaphores) != 1 || len(all.Locks) != 0 || len(all.RWLocks) != 0 {
		t.Fatalf("lock ls --kind semaphore --json: %d semaphores, %d locks, %d read-write locks; want only the one semaphore", len(all.Semaphores), len(all.Locks), len(all.RWLocks))
	}
}

// maxListPages bounds how many pages a listing test follows. A page of a
// Redis listing ends after a bounded number of SCAN calls, so on a server
// that holds many other keys a page may come back short, even empty, with a
// cursor to go on from, as an operator would.
const maxListPages = 200

// cursorFlag finds the cursor in the "more:" line of a listing.
var cursorFlag = regexp.MustCompile(`--cursor ("(?:[^"\\]|\\.)*"|\S+)`)

// listAll runs a listing command and every next page its "more:" line
// names, and returns the pages' output together.
func listAll(t *testing.T, args ...string) (code int, out, errb string) {
	t.Helper()
	var all, errs strings.Builder
	for pages, cursor := 0, ""; ; pages++ {
		if pages == maxListPages {
			t.Fatalf("%s: more than %d pages", strings.Join(args[:2], " "), maxListPages)
		}
		page := args
		if cursor != "" {
			page = append(slices.Clip(args), "--cursor", cursor)
		}
		code, out, errb = latchkey(t, page...)
		all.WriteString(out)
		errs.WriteString(errb)
		m := cursorFlag.FindStringSubmatch(out)
		if code != exitOK || m == nil {
			return code, all.String(), errs.String()
		}
		if cursor = m[1]; strings.HasPrefix(cursor, `"`) {
			var err error
			if cursor, err = strconv.Unquote(cursor); err != nil {
				t.Fatalf("cursor %s: %v", m[1], err)
			}
		}
	}
}

// breakOneReader checks that lock show shows the two readers of key, that
// lock break asks which, and that it breaks reader-a by its label: reader
// learns it by Done.
func breakOneReader(t *testing.T, url, key string, reader *lock.Lease) {
	t.Helper()
	code, out, _ := latchkey(t, "lock", "show", key, "--backend", url)
	if code != exitOK || !strings.Contains(out, "shared by 2") {
		t.Fatalf("lock show of the read-write lock: exit %d, %s", code, out)
	}
	code, _, errb := latchkey(t, "lock", "break", key, "--yes", "--as", "ana", "--backend", url)
	if code != exitUsage || !strings.Contains(errb, "--all") || !strings.Contains(errb, `"reader-b"`) {
		t.Fatalf("lock break of two readers without a choice: exit %d, %s", code, errb)
	}
	code, out, errb = latchkey(t, "lock", "break", key, "--holder", "reader-a", "--yes", "--as", "ana", "--backend", url)
	before, after, _ := strings.Cut(out, "now:")
	if code != exitOK || !strings.Contains(before, `"reader-a"`) || !strings.Contains(after, `"reader-b"`) || strings.Contains(after, `"reader-a"`) {
		t.Fatalf("lock break --holder reader-a: exit %d, %s%s", code, out, errb)
	}
	waitLost(t, reader, "the broken reader")
}

// waitLost waits for a broken holder's Done, closed at its next renewal.
func waitLost(t *testing.T, l *lock.Lease, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s's Done never closed", what)
	}
}
