package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// onFaultBackends runs test as a parallel subtest on each backend the
// process fault tests run on, a file on this host and a server, with a
// directory of its own and the backend's URL.
func onFaultBackends(t *testing.T, test func(t *testing.T, dir, url string)) {
	for name, url := range map[string]func(dir string) string{
		"sqlite": sqliteURL,
		"redis":  func(string) string { return "redis://" + testsvc.RedisAddr(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			test(t, dir, url(dir))
		})
	}
}

// waitContents waits for dir/name to exist and returns its contents.
func waitContents(t *testing.T, dir, name string) string {
	t.Helper()
	var b []byte
	waitFor(t, 30*time.Second, name+" to appear", func() bool {
		b, _ = os.ReadFile(filepath.Join(dir, name))
		return len(b) > 0
	})
	return strings.TrimSpace(string(b))
}

// signalHolder sends sig to a "latchkey run" process and to its command's
// process group (the command writes its pid to dir/pid): what a crash or a
// freeze of the whole host does to both. "latchkey run" first: killed
// second, it could see its command die and release the permit, as it
// should for a command that ends, before a crash's kill reached it (the
// permit came back 90-125 ms after such a "crash" in two runs).
func signalHolder(t *testing.T, run *os.Process, dir string, sig syscall.Signal) {
	t.Helper()
	pid, err := strconv.Atoi(waitContents(t, dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	_ = run.Signal(sig)
	signalGroupOf(pid, sig)
}

// TestRunPermitsKilledHolder SIGKILLs a holder of the only permit and its
// command: a waiter in another process gets the permit once its lease has
// run out (at least two thirds of the 2 s TTL after the kill, the lease
// being renewed every third), never before, and not much later.
func TestRunPermitsKilledHolder(t *testing.T) {
	t.Parallel()
	onFaultBackends(t, func(t *testing.T, dir, url string) {
		key := testsvc.KeyPrefix(t) + "killed"
		const ttl = 2 * time.Second
		holder, out := runProc(t, dir, "--permits", "1", "--ttl", ttl.String(), "--key", key, "--backend", url,
			"--", "sh", "-c", "echo $$ > pid; exec sleep 60")
		waitContents(t, dir, "pid")
		killed := time.Now()
		signalHolder(t, holder.Process, dir, syscall.SIGKILL)
		_ = holder.Wait()
		waiter, wout := runProc(t, dir, "--permits", "1", "--ttl", ttl.String(), "--wait", "30s", "--key", key, "--backend", url,
			"--", "sh", "-c", "date +%s%N > got")
		if code := exitCode(t, waiter); code != 0 {
			t.Fatalf("waiter: exit %d: %s (holder: %s)", code, wout, out)
		}
		ns, err := strconv.ParseInt(waitContents(t, dir, "got"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if early := killed.Add(2 * ttl / 3); time.Unix(0, ns).Before(early) {
			t.Fatalf("the killed holder's permit came back %v after the kill, before its lease could end", time.Unix(0, ns).Sub(killed))
		}
	})
}

// fencedWrite is a resource that fences in shell: under flock(1) it applies
// a write only with a token at least the highest applied, and logs either
// way.
const fencedWrite = `fenced_write() {
	(
		flock 9
		last=$(cat fence 2>/dev/null || echo 0)
		if [ "$LATCHKEY_FENCING_TOKEN" -ge "$last" ]; then
			echo "$LATCHKEY_FENCING_TOKEN" > fence; echo "applied $1 $LATCHKEY_FENCING_TOKEN" >> log
		else
			echo "refused $1 $LATCHKEY_FENCING_TOKEN" >> log
		fi
	) 9>fence.lock
}
`

// TestRunPermitsPausedHolderFenced SIGSTOPs a holder of the only permit and
// its command past the lease: another process takes the permit and writes;
// the paused command, resumed, writes too (it ignores SIGTERM, as a
// careless job would) and the fenced resource refuses it, while the paused
// "latchkey run" reports the lost lease (exit 76).
func TestRunPermitsPausedHolderFenced(t *testing.T) {
	t.Parallel()
	onFaultBackends(t, func(t *testing.T, dir, url string) {
		key := testsvc.KeyPrefix(t) + "paused"
		const ttl = 2 * time.Second
		holder, out := runProc(t, dir, "--permits", "1", "--ttl", ttl.String(), "--grace", "20s", "--key", key, "--backend", url,
			"--", "sh", "-c", fencedWrite+"trap '' TERM; echo $$ > pid; sleep 1; fenced_write paused")
		waitContents(t, dir, "pid") // the holder runs its command: taken before the pause's write lock
		pauseOutsideWrite(t, url, func() { signalHolder(t, holder.Process, dir, syscall.SIGSTOP) })
		waiter, wout := runProc(t, dir, "--permits", "1", "--ttl", ttl.String(), "--wait", "30s", "--key", key, "--backend", url,
			"--", "sh", "-c", fencedWrite+"fenced_write fresh")
		if code := exitCode(t, waiter); code != 0 {
			t.Fatalf("waiter: exit %d: %s", code, wout)
		}
		signalHolder(t, holder.Process, dir, syscall.SIGCONT)
		if code := exitCode(t, holder); code != exitLeaseLost {
			t.Fatalf("paused holder: exit %d, want %d (lease lost): %s", code, exitLeaseLost, out)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		log := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(log) != 2 || !strings.HasPrefix(log[0], "applied fresh ") || !strings.HasPrefix(log[1], "refused paused ") {
			t.Fatalf("the resource's log is %q, want the fresh write applied and the paused one refused", log)
		}
	})
}
