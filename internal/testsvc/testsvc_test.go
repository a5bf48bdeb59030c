package testsvc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		ci, req string
		want    bool
	}{
		{"", "", false},
		{"true", "", true},
		{"1", "", true},
		{"", "1", true},
		{"", "0", false},
		{"", "yes", false},
	} {
		t.Setenv("CI", tc.ci)
		t.Setenv(EnvRequireServices, tc.req)
		if got := Required(); got != tc.want {
			t.Errorf("CI=%q %s=%q: Required() = %v, want %v", tc.ci, EnvRequireServices, tc.req, got, tc.want)
		}
	}
}

func TestKeyPrefix(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9_.-]+-[0-9a-f]{8}:$`)
	seen := map[string]bool{}
	for _, name := range []string{"plain", "with space/and{brace}", strings.Repeat("x", 200)} {
		t.Run(name, func(t *testing.T) {
			for range 3 {
				p := KeyPrefix(t)
				if !re.MatchString(p) {
					t.Errorf("KeyPrefix = %q, does not match %v", p, re)
				}
				if !strings.HasPrefix(p, "TestKeyPrefix_") {
					t.Errorf("KeyPrefix = %q, want it to start with the sanitized test name", p)
				}
				if len(p) > 64+10 {
					t.Errorf("KeyPrefix = %q is %d bytes long", p, len(p))
				}
				if seen[p] {
					t.Errorf("KeyPrefix %q returned twice", p)
				}
				seen[p] = true
			}
		})
	}
}

func TestFreePort(t *testing.T) {
	p := FreePort(t)
	reservePort(p)
	defer releasePort(p)
	for range 20 {
		if q := FreePort(t); q == p {
			t.Fatalf("FreePort returned reserved port %d", p)
		}
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", FreePort(t)))
	if err != nil {
		t.Fatalf("listening on a FreePort: %v", err)
	}
	l.Close()
}

func TestPostgresDialAddr(t *testing.T) {
	for _, tc := range []struct{ dsn, network, addr string }{
		{DefaultPostgresURL, "tcp", "127.0.0.1:5432"},
		{"postgresql://u:p@db.example:6543/x", "tcp", "db.example:6543"},
		{"postgres://u@h1:1,h2:2/x", "tcp", "h1:1"},
		{"postgres://[::1]:7000/x", "tcp", "[::1]:7000"},
		{"postgres:///x?host=/run/postgresql&port=5433", "unix", "/run/postgresql/.s.PGSQL.5433"},
		{"host=10.0.0.1 port=5555 user=postgres dbname=test", "tcp", "10.0.0.1:5555"},
		{"user=postgres dbname=test", "tcp", "127.0.0.1:5432"},
		{"host='/tmp' dbname=test", "unix", "/tmp/.s.PGSQL.5432"},
	} {
		network, addr, err := postgresDialAddr(tc.dsn)
		if err != nil || network != tc.network || addr != tc.addr {
			t.Errorf("postgresDialAddr(%q) = %q, %q, %v; want %q, %q", tc.dsn, network, addr, err, tc.network, tc.addr)
		}
	}
}

// The shared servers: skipped (or failed in CI) when they are not running.

func TestRedisAddr(t *testing.T) {
	addr := RedisAddr(t)
	if got := redisDo(t, addr, "ECHO", "hi"); got != "hi" {
		t.Fatalf("ECHO hi = %q", got)
	}
}

func TestPostgresURL(t *testing.T) {
	url := PostgresURL(t)
	if !strings.HasPrefix(url, "postgres") {
		t.Fatalf("PostgresURL = %q", url)
	}
}

func TestUnreachableSkips(t *testing.T) {
	// A port nobody listens on: the check must fail fast, and Unavailable
	// must skip (not fail) outside CI.
	t.Setenv("CI", "")
	t.Setenv(EnvRequireServices, "")
	t.Setenv(EnvRedisAddr, fmt.Sprintf("127.0.0.1:%d", FreePort(t)))
	start := time.Now()
	ok := t.Run("redis", func(t *testing.T) {
		RedisAddr(t)
		t.Error("RedisAddr returned for a dead address")
	})
	if !ok {
		t.Fatal("subtest failed instead of skipping")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("check took %v", d)
	}
}

// redisDo sends one command over raw RESP and returns the reply: the text
// of a simple string, error ("-ERR ..."), integer or bulk string, "(nil)" for
// a null bulk, or the elements of an array joined by spaces.
func redisDo(t testing.TB, addr string, args ...string) string {
	t.Helper()
	reply, err := redisTry(addr, time.Second, args...)
	if err != nil {
		t.Fatalf("redis %s %v: %v", addr, args, err)
	}
	return reply
}

func redisTry(addr string, timeout time.Duration, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return line, nil
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "(nil)", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var parts []string
		for range n {
			s, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, " "), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
