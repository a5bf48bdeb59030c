package lockurl_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/lockurl"
)

// opened returns what openFn (Open, OpenRW, OpenSemaphores) opens from raw;
// t's cleanup closes it and checks that Close succeeds.
func opened[T interface{ Close() error }](t *testing.T, raw string, openFn func(context.Context, string) (T, error)) T {
	t.Helper()
	l, err := openFn(t.Context(), raw)
	if err != nil {
		t.Fatalf("opening %q: %v", lockurl.Redact(raw), err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func open(t *testing.T, raw string) lockurl.Locker {
	t.Helper()
	return opened(t, raw, lockurl.Open)
}

// excludes checks that a and b, opened from the same URL, are one lock space:
// while a holds key, b cannot take it; after a releases, b can, with a higher
// token.
func excludes(t *testing.T, a, b lock.Locker, key string) {
	t.Helper()
	ctx := t.Context()
	la, err := a.Acquire(ctx, key, lock.WithWait(0))
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	if _, err := b.Acquire(ctx, key, lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("second Locker took a held lock: %v", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, key, lock.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token %d after %d", lb.Token(), la.Token())
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// apart checks that a and c, opened with different prefixes, are two lock
// spaces: each takes key while the other holds it.
func apart(t *testing.T, a, c lock.Locker, key string, opts ...lock.Option) {
	t.Helper()
	opts = append(opts, lock.WithWait(0))
	la, err := a.Acquire(t.Context(), key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := c.Acquire(t.Context(), key, opts...)
	if err != nil {
		t.Fatalf("another prefix is another lock space: %v", err)
	}
	for _, l := range []*lock.Lease{la, lc} {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSQLite(t *testing.T) {
	dir := t.TempDir()
	t.Run("absolute", func(t *testing.T) {
		path := filepath.Join(dir, "locks.db")
		raw := "sqlite://" + path
		excludes(t, open(t, raw), open(t, raw), "k")
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("database file not at the URL's path: %v", err)
		}
	})
	t.Run("awkward path", func(t *testing.T) {
		// '%', '?' and '#' mean something in a SQLite URI; the file must
		// still land at exactly this path.
		path := filepath.Join(dir, "a dir", "50% off?#1.db")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		raw := (&url.URL{Scheme: "sqlite", Path: path}).String()
		excludes(t, open(t, raw), open(t, raw), "k")
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("database file not at the URL's path: %v", err)
		}
	})
	t.Run("relative", func(t *testing.T) {
		t.Chdir(dir)
		excludes(t, open(t, "sqlite:rel.db"), open(t, "sqlite:rel.db"), "k")
		if _, err := os.Stat(filepath.Join(dir, "rel.db")); err != nil {
			t.Fatalf("relative path not under the working directory: %v", err)
		}
	})
	t.Run("driver parameters", func(t *testing.T) {
		raw := "sqlite://" + filepath.Join(dir, "params.db") + "?_pragma=cache_size(-4000)"
		excludes(t, open(t, raw), open(t, raw), "k")
	})
}

func TestMem(t *testing.T) {
	l := open(t, "mem://")
	excludes(t, l, l, "k")
	// Each Open is its own lock space.
	other := open(t, "mem://")
	lease, err := l.Acquire(t.Context(), "k", lock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(t.Context())
	if _, err := other.Acquire(t.Context(), "k", lock.WithWait(0)); err != nil {
		t.Fatalf("separate mem:// Lockers share locks: %v", err)
	}
}

func TestPostgres(t *testing.T) {
	raw := testsvc.PostgresURL(t)
	key := testsvc.KeyPrefix(t) + "k"
	excludes(t, open(t, raw), open(t, raw), key)
	alt := strings.Replace(raw, "postgres://", "postgresql://", 1)
	excludes(t, open(t, raw), open(t, alt), key)
}

func TestMySQL(t *testing.T) {
	raw := testsvc.MySQLURL(t)
	excludes(t, open(t, raw), open(t, raw+"?clientFoundRows=true"), testsvc.KeyPrefix(t)+"k")
}

func TestRedis(t *testing.T) {
	addr := testsvc.RedisAddr(t)
	key := testsvc.KeyPrefix(t) + "k"
	excludes(t, open(t, "redis://"+addr+"/0"), open(t, "redis://"+addr), key)
	// A cluster URL pointing at a standalone server fails on first use, not
	// at parse time; its parsing is covered by TestBadURLs.
}

func TestRedlock(t *testing.T) {
	var hosts []string
	for range 3 {
		hosts = append(hosts, testsvc.StartRedis(t).Addr())
	}
	raw := "redlock://" + strings.Join(hosts, ",") + "/0?dial_timeout=1s"
	excludes(t, open(t, raw), open(t, raw), "k")
}

func TestEtcd(t *testing.T) {
	ep := testsvc.StartEtcd(t).Endpoint()
	key := testsvc.KeyPrefix(t) + "k"
	excludes(t, open(t, "etcd://"+ep), open(t, "etcd://"+ep+","+ep), key)
	// The path is a key prefix: the same one shares locks, another does not.
	a, b, c := open(t, "etcd://"+ep+"/app/"), open(t, "etcd://"+ep+"/app/"), open(t, "etcd://"+ep+"/other/")
	excludes(t, a, b, key)
	apart(t, a, c, key)
}

func TestZooKeeper(t *testing.T) {
	// Sessions of up to 40 s, so the default TTL (30 s) fits the default
	// session timeout (30 s).
	ep := testsvc.StartZooKeeper(t, "maxSessionTimeout=40000").Endpoint()
	key := testsvc.KeyPrefix(t) + "k"
	excludes(t, open(t, "zk://"+ep), open(t, "zk://"+ep+","+ep+"/latchkey?names=kazoo"), key)
	a, c := open(t, "zk://"+ep+"/app?session=10s&tick=500ms"), open(t, "zk://"+ep+"/other?session=10s")
	apart(t, a, c, key, lock.WithTTL(5*time.Second))

	// user:password@ authenticates with the digest scheme: a Locker
	// without the credentials cannot take, or even queue for, the lock.
	held, err := open(t, "zk://alice:s3cret@"+ep+"/secure").Acquire(t.Context(), key, lock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatalf("with credentials: %v", err)
	}
	defer held.Release(t.Context())
	if _, err := open(t, "zk://"+ep+"/secure").Acquire(t.Context(), key, lock.WithWait(0)); err == nil || errors.Is(err, lock.ErrNotAcquired) ||
		!strings.Contains(err.Error(), "not authenticated") {
		t.Errorf("without credentials: %v, want ZooKeeper's refusal", err)
	}
}

func TestBadURLs(t *testing.T) {
	const secret = "s3cr3t-pw"
	for _, tc := range []struct {
		url         string
		invalid     bool // wraps lock.ErrInvalid
		unsupported bool // wraps ErrUnsupported
		says        string
	}{
		{url: "", invalid: true, says: "no scheme"},
		{url: "locks.db", invalid: true, says: "supported: etcd://, mem://, mysql://, postgres://, postgresql://, redis://, redis-cluster://, rediss://, redlock://, sqlite://, zk://"},
		{url: "redis://:" + secret + "@127.0.0.1:6379/0?no_such_option=1", invalid: true, says: "no_such_option"},
		{url: "redis://:" + secret + "@127.0.0.1:1/0?dial_timeout=1s", says: "127.0.0.1:1"},
		{url: "redis-cluster://", invalid: true, says: "names no node"},
		{url: "CONSUL://a,b,c", invalid: true, unsupported: true, says: "supported: etcd://, mem://"},
		{url: "redlock://", invalid: true, says: "names no node"},
		{url: "redlock://a:1,,b:2", invalid: true, says: "empty node"},
		{url: "redlock://:" + secret + "@127.0.0.1:1,127.0.0.1:2/0?no_such_option=1", invalid: true, says: "no_such_option"},
		{url: "redlock://:" + secret + "@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?dial_timeout=1s", says: "only 0 of 3 redlock nodes answer"},
		{url: "etcd://", invalid: true, says: "names no member"},
		{url: "etcd://a:1,,b:2", invalid: true, says: "empty member"},
		{url: "etcd://user:" + secret + "@127.0.0.1:1", says: "127.0.0.1:1"},
		{url: "zk://", invalid: true, says: "names no server"},
		{url: "zk://a:1,,b:2", invalid: true, says: "empty server"},
		{url: "zk://user@127.0.0.1:1", invalid: true, says: "needs user:password@"},
		{url: "zk://127.0.0.1:1?bogus=1", invalid: true, says: "unknown or repeated parameter"},
		{url: "zk://127.0.0.1:1?session=soon", invalid: true, says: "session"},
		{url: "zk://127.0.0.1:1?tick=0s", invalid: true, says: "tick: want a positive duration"},
		{url: "zk://127.0.0.1:1/a/./b", invalid: true, says: "prefix"},
		{url: "sqlite://", invalid: true, says: "names no file"},
		{url: "sqlite:///", invalid: true, says: "names no file"},
		{url: "sqlite://locks.db", invalid: true, says: `has host "locks.db"`},
		{url: "mem://somewhere", invalid: true, says: "no host"},
		{url: "postgres://user:" + secret + "@127.0.0.1:badport/db", invalid: true, says: "invalid port"},
		{url: "postgres://user:" + secret + "@[::1/db", invalid: true, says: "cannot parse"},
		{url: "postgres://user:" + secret + "@127.0.0.1/db?sslmode=bogus", invalid: true, says: "sslmode"},
		{url: "postgres://user:" + secret + "@127.0.0.1:1/db?connect_timeout=2", says: "user:xxxxx@127.0.0.1:1"},
		{url: "postgres://user@127.0.0.1:1/db?connect_timeout=2&password=" + secret, says: "127.0.0.1:1"},
		{url: "mysql://user:" + secret + "@127.0.0.1:1/db?timeout=2s", says: "127.0.0.1:1"},
		{url: "mysql://user:" + secret + "@127.0.0.1", invalid: true, says: "names no database"},
		{url: "mysql:///db", invalid: true, says: "names no server"},
		{url: "mysql://user:" + secret + "@127.0.0.1/db?clientFoundRows=maybe", invalid: true, says: "clientFoundRows"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			l, err := lockurl.Open(ctx, tc.url)
			if err == nil {
				l.Close()
				t.Fatal("opened")
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, secret) {
				t.Errorf("error shows the password: %s", msg)
			}
			if got := errors.Is(err, lock.ErrInvalid); got != tc.invalid {
				t.Errorf("errors.Is(err, lock.ErrInvalid) = %v, want %v", got, tc.invalid)
			}
			if got := errors.Is(err, lockurl.ErrUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v", got, tc.unsupported)
			}
			if !strings.Contains(msg, tc.says) {
				t.Errorf("error does not say %q", tc.says)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw@h:5432/db?sslmode=disable":    "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"mysql://u:pw@h:3306/db?tls=true":              "mysql://u:xxxxx@h:3306/db?tls=true",
		"postgres://u@h/db?password=pw&sslmode=verify": "postgres://u@h/db?password=xxxxx&sslmode=verify",
		"postgres://u:pw@[::1/db":                      "postgres://xxxxx@[::1/db",
		"sqlite:///tmp/x.db":                           "sqlite:///tmp/x.db",
		"mem://":                                       "mem://",
	} {
		if got := lockurl.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSchemes(t *testing.T) {
	got := strings.Join(lockurl.Schemes(), " ")
	if want := "etcd mem mysql postgres postgresql redis redis-cluster rediss redlock sqlite zk"; got != want {
		t.Fatalf("Schemes() = %q, want %q", got, want)
	}
}

// TestPackageDocListsEveryScheme: go doc lock/lockurl lists every scheme
// Open accepts, so a user need not read the source to find redis://.
func TestPackageDocListsEveryScheme(t *testing.T) {
	src, err := os.ReadFile("lockurl.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(src), "package lockurl")
	for _, s := range lockurl.Schemes() {
		if !strings.Contains(doc, "//\t"+s+"://") && !strings.Contains(doc, "//\t"+s+":") {
			t.Errorf("the package doc does not list %s://", s)
		}
	}
}
