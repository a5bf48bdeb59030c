package testsvc

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartRedis(t *testing.T) {
	t.Parallel()
	s := StartRedis(t, "--maxmemory", "16mb")
	addr := s.Addr()
	if got := redisDo(t, addr, "PING"); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}
	if got := redisDo(t, addr, "CONFIG", "GET", "maxmemory"); got != "maxmemory 16777216" {
		t.Errorf("extra args not applied: CONFIG GET maxmemory = %q", got)
	}
	if got := redisDo(t, addr, "CONFIG", "GET", "save"); got != "save " {
		t.Errorf("CONFIG GET save = %q, want persistence off", got)
	}
	redisDo(t, addr, "SET", "k", "v")
	pid := s.Pid()
	if pid == 0 {
		t.Fatal("Pid() = 0 for a running server")
	}

	// Paused: accepts TCP (the kernel does) but never answers.
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, err := redisTry(addr, 200*time.Millisecond, "PING"); err == nil {
		t.Fatal("a SIGSTOPped server answered PING")
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if got := redisDo(t, addr, "GET", "k"); got != "v" {
		t.Fatalf("after SIGCONT GET k = %q", got)
	}

	start := time.Now()
	s.Restart()
	t.Logf("Restart took %v", time.Since(start))
	if s.Addr() != addr {
		t.Fatalf("address changed across Restart: %s -> %s", addr, s.Addr())
	}
	if s.Pid() == pid || s.Pid() == 0 {
		t.Fatalf("Pid after Restart = %d (was %d)", s.Pid(), pid)
	}
	if got := redisDo(t, addr, "GET", "k"); got != "(nil)" {
		t.Fatalf("after Restart GET k = %q, want an empty server", got)
	}

	s.Stop()
	if s.Pid() != 0 {
		t.Fatalf("Pid() = %d after Stop", s.Pid())
	}
	if _, err := redisTry(addr, 200*time.Millisecond, "PING"); err == nil {
		t.Fatal("a stopped server answered PING")
	}
	s.Stop() // twice is fine
	if err := s.Signal(syscall.SIGCONT); err == nil {
		t.Error("Signal on a stopped server succeeded")
	}
	s.Start()
	redisDo(t, addr, "PING")

	// A crash, then Start again.
	if err := s.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); s.Pid() != 0; {
		if time.Now().After(deadline) {
			t.Fatal("SIGKILLed server still running")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Start()
	if got := redisDo(t, addr, "PING"); got != "PONG" {
		t.Fatalf("PING after crash and Start = %q", got)
	}
	// Stopping a paused server must not hang.
	_ = s.Signal(syscall.SIGSTOP)
	start = time.Now()
	s.Stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Stop of a paused server took %v", d)
	}
}

func TestStartRedisCleanup(t *testing.T) {
	t.Parallel()
	var addr string
	t.Run("inner", func(t *testing.T) {
		addr = StartRedis(t).Addr()
	})
	if _, err := redisTry(addr, 200*time.Millisecond, "PING"); err == nil {
		t.Fatal("server still answers after its test's cleanup")
	}
}

func TestStartPostgres(t *testing.T) {
	t.Parallel()
	start := time.Now()
	s := StartPostgres(t)
	t.Logf("StartPostgres took %v", time.Since(start))
	if !strings.HasPrefix(s.URL(), "postgres://postgres@127.0.0.1:") || !strings.HasSuffix(s.URL(), "/postgres?sslmode=disable") {
		t.Fatalf("URL() = %q", s.URL())
	}
	port := s.Port()
	if !strings.Contains(s.URL(), ":"+strconv.Itoa(port)+"/") {
		t.Fatalf("URL() = %q does not use port %d", s.URL(), port)
	}
	pgDial(t, port, true)
	psql(t, port, "create table survives (x int); insert into survives values (42)")
	if s.Pid() == 0 {
		t.Fatal("Pid() = 0 for a running server")
	}

	start = time.Now()
	s.Restart()
	t.Logf("Restart took %v", time.Since(start))
	pgDial(t, port, true)
	if got := psql(t, port, "select x from survives"); got != "42" && got != "" {
		t.Fatalf("after Restart: select = %q, want 42", got)
	}

	s.Stop()
	pgDial(t, port, false)
	if s.Pid() != 0 {
		t.Fatalf("Pid() = %d after Stop", s.Pid())
	}
	s.Stop()
	s.Start()
	pgDial(t, port, true)
	psql(t, port, "select 1")
}

func TestStartPostgresTwo(t *testing.T) {
	t.Parallel()
	var a, b *PostgresServer
	start := time.Now()
	a = StartPostgres(t)
	b = StartPostgres(t)
	t.Logf("two more clusters took %v", time.Since(start))
	if a.URL() == b.URL() {
		t.Fatalf("two servers share %s", a.URL())
	}
	psql(t, a.Port(), "create table only_a (x int)")
	if out, err := psqlTry(b.Port(), "select * from only_a"); err == nil {
		t.Fatalf("table of server a visible on b: %s", out)
	}
}

func pgDial(t *testing.T, port int, wantUp bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err == nil {
		c.Close()
	}
	if up := err == nil; up != wantUp {
		t.Fatalf("dial port %d: %v (want up=%v)", port, err, wantUp)
	}
}

// psql runs sql with psql when it is installed and returns its unaligned
// output; without psql it returns "".
func psql(t *testing.T, port int, sql string) string {
	t.Helper()
	if _, err := exec.LookPath("psql"); err != nil {
		return ""
	}
	out, err := psqlTry(port, sql)
	if err != nil {
		t.Fatalf("psql %q: %v: %s", sql, err, out)
	}
	return out
}

func psqlTry(port int, sql string) (string, error) {
	if _, err := exec.LookPath("psql"); err != nil {
		return "", err
	}
	cmd := exec.Command("psql", "-X", "-w", "-q", "-At", "-v", "ON_ERROR_STOP=1",
		"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "postgres", "-d", "postgres", "-c", sql)
	cmd.Env = pgEnv()
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
