package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// electBackend is one backend the fault tests run "latchkey elect" on.
type electBackend struct {
	name string
	url  func(t *testing.T) string
	ttl  time.Duration
}

// electBackends are every backend, on the servers the tests share or start.
// A ZooKeeper term lives as long as its session: the URL asks for a session
// as long as the TTL.
func electBackends() []electBackend {
	return []electBackend{
		{"sqlite", func(t *testing.T) string { return sqliteURL(t.TempDir()) }, time.Second},
		{"redis", func(t *testing.T) string { return "redis://" + testsvc.RedisAddr(t) + "/0" }, time.Second},
		{"postgres", func(t *testing.T) string { return testsvc.PostgresURL(t) }, time.Second},
		{"mysql", func(t *testing.T) string { return testsvc.MySQLURL(t) }, time.Second},
		{"etcd", func(t *testing.T) string { return "etcd://" + testsvc.StartEtcd(t).Endpoint() }, 2 * time.Second},
		{"zookeeper", func(t *testing.T) string {
			return "zk://" + testsvc.StartZooKeeper(t).Endpoint() + "/latchkey?session=2s"
		}, 2 * time.Second},
	}
}

// fencedWrites is a command that writes its term's token to a fenced
// resource every 50 ms: a file holding the highest token applied, which
// flock(1) makes a compare-and-set. Each write is logged as "TOKEN ok" or,
// when a higher token was applied before, "TOKEN refused". It records its
// pid (its process group's id) in pid.NAME and its token in token.NAME.
func fencedWrites(name string) []string {
	return []string{"sh", "-c", `T=$LATCHKEY_FENCING_TOKEN
echo $$ > pid.` + name + `.tmp && mv pid.` + name + `.tmp pid.` + name + `
echo "$T" > token.` + name + `
while :; do
	flock fence.lock sh -c 'h=$(cat highest 2>/dev/null || echo 0)
if [ "$1" -ge "$h" ]; then echo "$1" > highest; echo "$1 ok" >> writes; else echo "$1 refused" >> writes; fi' sh "$T"
	sleep 0.05
done`}
}

func readToken(t *testing.T, path string) uint64 {
	t.Helper()
	waitFile(t, path)
	var b []byte
	for range 100 {
		b, _ = os.ReadFile(path)
		if strings.HasSuffix(string(b), "\n") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q", path, b)
	}
	return n
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	waitFile(t, path)
	b, _ := os.ReadFile(path)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q", path, b)
	}
	return n
}

// checkFenced checks the fenced resource's log: the tokens it applied never
// went down.
func checkFenced(t *testing.T, dir string) (refused map[uint64]int) {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, "writes"))
	refused = map[uint64]int{}
	var last uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		tok, _ := strconv.ParseUint(f[0], 10, 64)
		switch f[1] {
		case "ok":
			if tok < last {
				t.Fatalf("the resource applied token %d after %d:\n%s", tok, last, b)
			}
			last = tok
		case "refused":
			refused[tok]++
		}
	}
	return refused
}

// candidate starts "latchkey elect" for name with fencedWrites.
func candidate(t *testing.T, b electBackend, url, dir, key, name string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	args := append([]string{"--key", key, "--ttl", b.ttl.String(), "--grace", "1s", "--value", name, "--backend", url, "--"}, fencedWrites(name)...)
	return electProc(t, dir, args...)
}

// TestElectLeaderKilled: the leader (latchkey and its command) is SIGKILLed;
// the waiting candidate is elected within the TTL plus a few round trips,
// with a higher token. (That bound only catches a failover that waits for
// something else than the TTL: bench measures failover.)
func TestElectLeaderKilled(t *testing.T) {
	t.Parallel()
	for _, b := range electBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url, dir := b.url(t), t.TempDir()
			key := "killed-" + testsvc.KeyPrefix(t)
			a, _ := candidate(t, b, url, dir, key, "a")
			tokA := readToken(t, filepath.Join(dir, "token.a"))
			pidA := readPid(t, filepath.Join(dir, "pid.a"))
			bproc, bout := candidate(t, b, url, dir, key, "b")
			time.Sleep(500 * time.Millisecond) // b campaigns
			if _, err := os.Stat(filepath.Join(dir, "token.b")); err == nil {
				t.Fatal("b was elected while a led")
			}
			killed := time.Now()
			_ = a.Process.Kill()
			_ = syscall.Kill(-pidA, syscall.SIGKILL)
			tokB := readToken(t, filepath.Join(dir, "token.b"))
			took := time.Since(killed)
			t.Logf("b elected %v after a was killed (TTL %v)", took.Round(time.Millisecond), b.ttl)
			if tokB <= tokA {
				t.Fatalf("b's token %d is not above the killed leader's %d", tokB, tokA)
			}
			if limit := 2*b.ttl + 5*time.Second; took > limit {
				t.Fatalf("b elected %v after a was killed, beyond TTL %v plus a few round trips", took, b.ttl)
			}
			_ = bproc.Process.Signal(syscall.SIGTERM)
			exitCode(t, bproc)
			pidB := readPid(t, filepath.Join(dir, "pid.b"))
			_ = syscall.Kill(-pidB, syscall.SIGKILL)
			checkFenced(t, dir)
			_ = bout
		})
	}
}

// TestElectLeaderPaused: the leader (latchkey and its command) is SIGSTOPped
// past its TTL. A new leader is elected and writes; the old command, resumed
// first, writes with its old token and the resource refuses it; the old
// latchkey, resumed, finds its term over (Done), stops its command and exits
// 76. Never two leaders applied: the resource's tokens never go down.
func TestElectLeaderPaused(t *testing.T) {
	t.Parallel()
	for _, b := range electBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			url, dir := b.url(t), t.TempDir()
			key := "paused-" + testsvc.KeyPrefix(t)
			a, aout := candidate(t, b, url, dir, key, "a")
			tokA := readToken(t, filepath.Join(dir, "token.a"))
			pidA := readPid(t, filepath.Join(dir, "pid.a"))
			bproc, _ := candidate(t, b, url, dir, key, "b")
			time.Sleep(300 * time.Millisecond)
			_ = a.Process.Signal(syscall.SIGSTOP)
			_ = syscall.Kill(-pidA, syscall.SIGSTOP)
			resumed := false
			resume := func() {
				if !resumed {
					resumed = true
					_ = syscall.Kill(-pidA, syscall.SIGCONT)
					_ = a.Process.Signal(syscall.SIGCONT)
				}
			}
			defer resume()
			tokB := readToken(t, filepath.Join(dir, "token.b"))
			if tokB <= tokA {
				t.Fatalf("b's token %d is not above the paused leader's %d", tokB, tokA)
			}
			waitFor(t, "b's first write", func() bool {
				w, _ := os.ReadFile(filepath.Join(dir, "writes"))
				return strings.Contains(string(w), strconv.FormatUint(tokB, 10)+" ok")
			})
			// The old command first: its late writes meet the resource.
			_ = syscall.Kill(-pidA, syscall.SIGCONT)
			waitFor(t, "the old leader's write refused", func() bool {
				w, _ := os.ReadFile(filepath.Join(dir, "writes"))
				return strings.Contains(string(w), strconv.FormatUint(tokA, 10)+" refused")
			})
			resume()
			if code := exitCode(t, a); code != exitLeaseLost {
				t.Fatalf("the paused leader exited %d, want %d: %s", code, exitLeaseLost, aout)
			}
			_ = bproc.Process.Signal(syscall.SIGTERM)
			exitCode(t, bproc)
			_ = syscall.Kill(-readPid(t, filepath.Join(dir, "pid.b")), syscall.SIGKILL)
			if refused := checkFenced(t, dir); refused[tokB] > 0 {
				t.Fatalf("the new leader's writes were refused %d times", refused[tokB])
			}
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
