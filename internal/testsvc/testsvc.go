// Package testsvc gives tests in this repository the real servers they run
// against, and the tools to hurt them.
//
// Shared servers, started once per machine by scripts/services.sh:
//
//	addr := testsvc.RedisAddr(t)    // LATCHKEY_REDIS_ADDR, default 127.0.0.1:6379
//	url := testsvc.PostgresURL(t)   // LATCHKEY_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	prefix := testsvc.KeyPrefix(t)  // keep every key and table name of the test under it
//
// Private servers, for tests that stop, pause or restart them:
//
//	r := testsvc.StartRedis(t)      // its own redis-server child on a free port
//	r.Signal(syscall.SIGSTOP)       // freeze it; r.Restart() brings it back empty on the same port
//	pg := testsvc.StartPostgres(t)  // a throwaway cluster; pg.URL(), pg.Restart()
//
// Faults on the wire:
//
//	p := testsvc.NewProxy(t, addr)  // point the client at p.Addr()
//	p.Cut(); p.Restore(); p.SetLatency(50 * time.Millisecond); p.Blackhole(true)
//
// When a server is missing the test is skipped, unless services are required
// (CI set, or LATCHKEY_REQUIRE_SERVICES=1): then it fails. CI never skips.
//
// Everything a helper starts is stopped by t.Cleanup. Helpers that take a
// testing.TB report failures with t.Fatalf and must be called from the test's
// own goroutine.
package testsvc

import (
	"bufio"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables read by this package.
const (
	// EnvRedisAddr overrides the address of the shared Redis (host:port).
	EnvRedisAddr = "LATCHKEY_REDIS_ADDR"
	// EnvPostgresURL overrides the URL of the shared PostgreSQL database.
	EnvPostgresURL = "LATCHKEY_POSTGRES_URL"
	// EnvRequireServices, set to 1, makes a missing server fail the test
	// instead of skipping it, as CI does.
	EnvRequireServices = "LATCHKEY_REQUIRE_SERVICES"
)

// Defaults for the shared servers, matching scripts/services.sh.
const (
	// DefaultRedisAddr is the shared Redis used when EnvRedisAddr is unset.
	DefaultRedisAddr = "127.0.0.1:6379"
	// DefaultPostgresURL is the shared database used when EnvPostgresURL is unset.
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// checkTimeout bounds every reachability check of a shared server.
const checkTimeout = 2 * time.Second

// dialChecked connects to addr over TCP within timeout, and gives the
// connection's reads and writes the same time from now.
func dialChecked(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Required reports whether tests must fail, not skip, when a server they need
// is unavailable: true when CI is set non-empty or LATCHKEY_REQUIRE_SERVICES=1.
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv(EnvRequireServices) == "1"
}

// Unavailable ends the test because something it needs is missing: t.Fatalf
// when Required(), t.Skipf otherwise.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s (services are required here: run scripts/services.sh)", msg)
	}
	t.Skipf("%s (skipped; set %s=1 or CI=true to fail instead)", msg, EnvRequireServices)
}

// RedisAddr returns the host:port of the shared Redis (LATCHKEY_REDIS_ADDR,
// default 127.0.0.1:6379) after checking that it answers PING within 2 s; it
// calls Unavailable when it does not. A redis:// URL is accepted in the
// variable too; only its host:port is used.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := cmp.Or(os.Getenv(EnvRedisAddr), DefaultRedisAddr)
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || u.Host == "" {
			t.Fatalf("testsvc: %s=%q is not host:port", EnvRedisAddr, addr)
		}
		addr = u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "6379")
		}
	}
	if err := pingRedis(addr, checkTimeout); err != nil {
		Unavailable(t, "testsvc: redis at %s: %v", addr, err)
	}
	return addr
}

// pingRedis sends PING over a raw RESP exchange and expects +PONG.
func pingRedis(addr string, timeout time.Duration) error {
	c, err := dialChecked(addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading PING reply: %w", err)
	}
	switch line = strings.TrimRight(line, "\r\n"); {
	case strings.HasPrefix(line, "-NOAUTH"):
		return fmt.Errorf("%w: PING answered %q", errRedisNeedsAuth, line)
	case line != "+PONG":
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// errRedisNeedsAuth is a Redis that answers, but only to a client that
// authenticates first (requirepass, ACL users).
var errRedisNeedsAuth = errors.New("redis needs authentication")

// PostgresURL returns the URL of the shared PostgreSQL database
// (LATCHKEY_POSTGRES_URL, default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable) after checking that
// its host:port accepts a TCP connection within 2 s; it calls Unavailable when
// it does not. Key=value connection strings (host=... port=...) and Unix socket
// directories are understood too.
func PostgresURL(t testing.TB) string {
	t.Helper()
	dsn := cmp.Or(os.Getenv(EnvPostgresURL), DefaultPostgresURL)
	network, addr, err := postgresDialAddr(dsn)
	if err != nil {
		t.Fatalf("testsvc: %s: %v", EnvPostgresURL, err)
	}
	c, err := net.DialTimeout(network, addr, checkTimeout)
	if err != nil {
		Unavailable(t, "testsvc: postgres at %s: %v", addr, err)
		return dsn
	}
	c.Close()
	return dsn
}

// postgresHostPort returns the host and port a PostgreSQL DSN names, a URL
// (postgres://) or key=value pairs, each empty if it names none.
func postgresHostPort(dsn string) (host, port string, err error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		for _, f := range strings.Fields(dsn) {
			k, v, ok := strings.Cut(f, "=")
			switch {
			case !ok:
			case k == "host":
				host = strings.Trim(v, "'")
			case k == "port":
				port = strings.Trim(v, "'")
			}
		}
		return host, port, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", err
	}
	hostport := strings.Split(u.Host, ",")[0]
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	} else {
		host = strings.Trim(hostport, "[]")
	}
	q := u.Query()
	if host == "" {
		host = q.Get("host")
	}
	if port == "" {
		port = q.Get("port")
	}
	return host, port, nil
}

// postgresDialAddr finds the first server address of a libpq-style DSN.
func postgresDialAddr(dsn string) (network, addr string, err error) {
	host, port, err := postgresHostPort(dsn)
	if err != nil {
		return "", "", err
	}
	host, _, _ = strings.Cut(host, ",")
	port, _, _ = strings.Cut(port, ",")
	if port == "" {
		port = "5432"
	}
	if _, err := strconv.Atoi(port); err != nil {
		return "", "", fmt.Errorf("bad port %q in %q", port, dsn)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.HasPrefix(host, "/") {
		return "unix", filepath.Join(host, ".s.PGSQL."+port), nil
	}
	return "tcp", net.JoinHostPort(host, port), nil
}

// reserved holds the ports of servers started by this package, including
// stopped ones waiting to be restarted on the same port, so FreePort never
// hands them out again within this process.
var reserved = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

func reservePort(port int) {
	reserved.Lock()
	reserved.ports[port] = true
	reserved.Unlock()
}

func releasePort(port int) {
	reserved.Lock()
	delete(reserved.ports, port)
	reserved.Unlock()
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago (it
// listens on port 0 and closes). Ports of servers this package started in the
// same process are never returned, even while such a server is stopped.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testsvc: free port: %v", err)
	}
	return port
}

func freePort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		reserved.Lock()
		taken := reserved.ports[port]
		reserved.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port after 100 tries")
}

// KeyPrefix returns a prefix unique to this test and this run: the test's
// name with every character outside [A-Za-z0-9_.-] replaced by '_', a dash,
// 8 random hex characters and a colon, e.g. "TestLock_contended-1f0c9a3b:".
// Parallel tests and repeated runs against the same server never share keys.
// The name part is cut to 64 characters; no brace survives, so the prefix
// never forms a Redis Cluster hash tag by accident.
func KeyPrefix(t testing.TB) string {
	t.Helper()
	name := []byte(t.Name())
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			name[i] = '_'
		}
	}
	if len(name) > 64 {
		name = name[:64]
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testsvc: random: %v", err)
	}
	return string(name) + "-" + hex.EncodeToString(b[:]) + ":"
}

// TableName returns prefix followed by 12 random hex digits: the name of a
// table of one test's own on a shared database server.
func TableName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// tail returns the last n bytes of a file, for failure messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, 0)
	}
	b := make([]byte, n)
	m, _ := f.Read(b)
	return string(b[:m])
}
