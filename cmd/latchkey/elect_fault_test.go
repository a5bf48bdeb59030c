package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
		{"redlock", func(t *testing.T) string {
			var addrs []string
			for range 3 {
				addrs = append(addrs, testsvc.StartRedis(t).Addr())
			}
			return "redlock://" + strings.Join(addrs, ",")
		}, time.Second},
		{"etcd", func(t *testing.T) string { return "etcd://" + testsvc.StartEtcd(t).Endpoint() }, 2 * time.Second},
		{"zookeeper", func(t *testing.T) string {
			return "zk://" + testsvc.StartZooKeeper(t).Endpoint() + "/latchkey?session=2s"
		}, 2 * time.Second},
	}
}

// fenceScript is the fenced resource, on the shared Redis: it applies a
// write only with a token at least the highest applied (KEYS[1]), and logs
// each write to KEYS[2] as "TOKEN ok" or "TOKEN refused". (A file guarded by
// flock(1) would not do: a writer SIGSTOPped while holding the file's lock
// would stop every other writer with it.)
const fenceScript = `local t = tonumber(ARGV[1])
if t >= tonumber(redis.call('GET', KEYS[1]) or '0') then
	redis.call('SET', KEYS[1], ARGV[1]); redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ok'); return 1
end
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' refused'); return 0`

// A fence is one test's fenced resource.
type fence struct {
	addr, key string
	c         *redis.Client
}

func newFence(t *testing.T) *fence {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		testsvc.Unavailable(t, "redis-cli not on PATH (apt-get install redis-tools)")
	}
	addr := testsvc.RedisAddr(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	f := &fence{addr: addr, key: testsvc.KeyPrefix(t) + "fence", c: c}
	t.Cleanup(func() { c.Del(context.Background(), f.key, f.key+":log"); _ = c.Close() })
	return f
}

// writes returns the resource's log.
func (f *fence) writes(t *testing.T) []string {
	t.Helper()
	log, err := f.c.LRange(t.Context(), f.key+":log", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// fencedWrites is a command that writes its term's token to the fenced
// resource every 50 ms. It records its pid (its process group's id) in
// pid.NAME and its token in token.NAME.
func (f *fence) fencedWrites(name string) []string {
	host, port, _ := net.SplitHostPort(f.addr)
	return []string{"sh", "-c", `T=$LATCHKEY_FENCING_TOKEN
echo $$ > pid.` + name + `.tmp && mv pid.` + name + `.tmp pid.` + name + `
echo "$T" > token.` + name + `
while :; do
	redis-cli -h ` + host + ` -p ` + port + ` EVAL "$0" 2 ` + f.key + ` ` + f.key + `:log "$T" > /dev/null
	sleep 0.05
done`, fenceScript}
}

// readToken waits for the token a command writes to path, a whole line.
func readToken(t *testing.T, path string) uint64 {
	t.Helper()
	var b []byte
	waitFor(t, 30*time.Second, "a line in "+path, func() bool {
		b, _ = os.ReadFile(path)
		return strings.HasSuffix(string(b), "\n")
	})
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q", path, b)
	}
	return n
}

// signalGroupOf sends sig to the process group of pid: a command and its
// guard and children, as a crash or freeze of the host would reach them.
func signalGroupOf(pid int, sig syscall.Signal) {
	if pgid, err := syscall.Getpgid(pid); err == nil {
		_ = syscall.Kill(-pgid, sig)
	}
}

// readPid waits for the pid a command writes to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 40*time.Second, "a pid in "+path, func() bool {
		b, _ := os.ReadFile(path)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		pid = n
		return err == nil && n > 0
	})
	return pid
}

// checkFenced checks the fenced resource's log: the tokens it applied never
// went down. It returns how often each token was refused.
func (f *fence) checkFenced(t *testing.T) (refused map[uint64]int) {
	t.Helper()
	log := f.writes(t)
	refused = map[uint64]int{}
	var last uint64
	for _, line := range log {
		tf := strings.Fields(line)
		if len(tf) != 2 {
			continue
		}
		tok, _ := strconv.ParseUint(tf[0], 10, 64)
		switch tf[1] {
		case "ok":
			if tok < last {
				t.Fatalf("the resource applied token %d after %d: %q", tok, last, log)
			}
			last = tok
		case "refused":
			refused[tok]++
		}
	}
	return refused
}

// wrote reports whether the resource logged line.
func (f *fence) wrote(t *testing.T, line string) bool {
	return slices.Contains(f.writes(t), line)
}

// candidate starts "latchkey elect" for name with fencedWrites.
// Its cleanup kills the command's process group too, in case a failed test
// left it behind.
func candidate(t *testing.T, f *fence, b electBackend, url, dir, key, name string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	args := append([]string{"--key", key, "--ttl", b.ttl.String(), "--grace", "1s", "--value", name, "--backend", url, "--"}, f.fencedWrites(name)...)
	cmd, out := electProc(t, dir, args...)
	if b.name == "redis" {
		// The lock's keys and fencing counter, which would outlive the test.
		t.Cleanup(func() { testsvc.DeleteKeys(f.c, "latchkey:lock:{"+key+"}") })
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "pid."+name)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				signalGroupOf(pid, syscall.SIGCONT)
				signalGroupOf(pid, syscall.SIGKILL)
			}
		}
	})
	return cmd, out
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
			url, dir, f := b.url(t), t.TempDir(), newFence(t)
			key := "killed-" + testsvc.KeyPrefix(t)
			a, _ := candidate(t, f, b, url, dir, key, "a")
			tokA := readToken(t, filepath.Join(dir, "token.a"))
			pidA := readPid(t, filepath.Join(dir, "pid.a"))
			bproc, _ := candidate(t, f, b, url, dir, key, "b")
			time.Sleep(500 * time.Millisecond) // b campaigns
			if _, err := os.Stat(filepath.Join(dir, "token.b")); err == nil {
				t.Fatal("b was elected while a led")
			}
			killed := time.Now()
			_ = a.Process.Kill()
			signalGroupOf(pidA, syscall.SIGKILL)
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
			f.checkFenced(t)
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
			url, dir, f := b.url(t), t.TempDir(), newFence(t)
			key := "paused-" + testsvc.KeyPrefix(t)
			a, aout := candidate(t, f, b, url, dir, key, "a")
			tokA := readToken(t, filepath.Join(dir, "token.a"))
			pidA := readPid(t, filepath.Join(dir, "pid.a"))
			bproc, _ := candidate(t, f, b, url, dir, key, "b")
			time.Sleep(300 * time.Millisecond)
			resumed := false
			pauseOutsideWrite(t, url, func() {
				_ = a.Process.Signal(syscall.SIGSTOP)
				signalGroupOf(pidA, syscall.SIGSTOP)
			})
			resume := func() {
				if !resumed {
					resumed = true
					signalGroupOf(pidA, syscall.SIGCONT)
					_ = a.Process.Signal(syscall.SIGCONT)
				}
			}
			defer resume()
			tokB := readToken(t, filepath.Join(dir, "token.b"))
			if tokB <= tokA {
				t.Fatalf("b's token %d is not above the paused leader's %d", tokB, tokA)
			}
			waitFor(t, 30*time.Second, "b's first write", func() bool { return f.wrote(t, strconv.FormatUint(tokB, 10)+" ok") })
			// The old command first: its late writes meet the resource.
			signalGroupOf(pidA, syscall.SIGCONT)
			waitFor(t, 30*time.Second, "the old leader's write refused", func() bool { return f.wrote(t, strconv.FormatUint(tokA, 10)+" refused") })
			resume()
			if code := exitCode(t, a); code != exitLeaseLost {
				t.Fatalf("the paused leader exited %d, want %d: %s", code, exitLeaseLost, aout)
			}
			_ = bproc.Process.Signal(syscall.SIGTERM)
			exitCode(t, bproc)
			if refused := f.checkFenced(t); refused[tokB] > 0 {
				t.Fatalf("the new leader's writes were refused %d times", refused[tokB])
			}
		})
	}
}
