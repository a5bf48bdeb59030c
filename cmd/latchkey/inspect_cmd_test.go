package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/bloomfilter"
	"github.com/latchkey-go/latchkey/dedup/redisstore"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/idemurl"
	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// idemStores are the store URLs the idem commands are tried on.
func idemStores(t *testing.T) map[string]string {
	return map[string]string{
		"sqlite":   "sqlite://" + filepath.Join(t.TempDir(), "idem.db"),
		"postgres": testsvc.PostgresURL(t),
		"redis":    "redis://" + testsvc.RedisAddr(t) + "/0?prefix=" + testsvc.KeyPrefix(t),
	}
}

func decodeJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	return v
}

// A customer's payment went through the middleware; support finds it by
// the request's parts, forgets it, and the customer's retry is charged
// again; a payment still running is not forgotten without --force.
func TestIdemShowAndForget(t *testing.T) {
	t.Parallel()
	for name, storeURL := range idemStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, err := idemurl.Open(t.Context(), storeURL)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			p := newIdemPayments(st)
			// Keys of their own: the default table on the shared PostgreSQL
			// outlives the test.
			k1, kSlow, kUnknown := "k-1-"+idem.NewToken(), "k-slow-"+idem.NewToken(), "k-unknown-"+idem.NewToken()
			sum := sha256.Sum256([]byte("Bearer sk_live_c1"))
			parts := []string{"--store", storeURL, "--principal", "authz-sha256:" + hex.EncodeToString(sum[:]), "--route", "/payments"}
			forgetDonePayment(t, p, storeURL, parts, k1, kUnknown)
			forgetRunningPayment(t, p, parts, kSlow)
		})
	}
}

// idemPayments is a payment handler behind idemhttp.Middleware: each run is a
// charge, and a slow payment runs until release closes.
type idemPayments struct {
	h       http.Handler
	charges atomic.Int32
	release chan struct{}
}

func newIdemPayments(st idem.Store) *idemPayments {
	p := &idemPayments{release: make(chan struct{})}
	p.h = idemhttp.Middleware(st, idemhttp.WithErrorHandler(func(*http.Request, error) {}))(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Slow") != "" {
				<-p.release
			}
			n := p.charges.Add(1)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"charge":"ch_` + string(rune('0'+n)) + `"}`))
		}))
	return p
}

// pay sends the customer's payment with key and returns the status.
func (p *idemPayments) pay(key string, slow bool) int {
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":100}`))
	req.Header.Set("Authorization", "Bearer sk_live_c1")
	req.Header.Set("Idempotency-Key", key)
	if slow {
		req.Header.Set("X-Slow", "1")
	}
	w := httptest.NewRecorder()
	p.h.ServeHTTP(w, req)
	return w.Code
}

// latchkeyIdem runs "latchkey idem args... parts...".
func latchkeyIdem(t *testing.T, parts []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return latchkey(t, append(append([]string{"idem"}, args...), parts...)...)
}

// forgetDonePayment pays with key, finds the payment by the request's parts
// and by its scoped key, forgets it, and sees the retry charged again; a
// key never used is not found.
func forgetDonePayment(t *testing.T, p *idemPayments, storeURL string, parts []string, key, unknown string) {
	t.Helper()
	if code := p.pay(key, false); code != http.StatusCreated {
		t.Fatal(code)
	}
	code, out, errOut := latchkeyIdem(t, parts, "show", "--json", "--body", "--key", key)
	rep := decodeJSON[idemReport](t, out)
	if code != exitOK || !rep.Found || rep.State != "done" || rep.Status != 201 || rep.Body == nil ||
		*rep.Body != `{"charge":"ch_1"}` || rep.Expires == "" || rep.Fingerprint == "" {
		t.Fatalf("show: exit %d, %+v\n%s", code, rep, errOut)
	}
	if code, out, _ := latchkeyIdem(t, parts, "show", "--key", key); code != exitOK ||
		!strings.Contains(out, "state:        done") || !strings.Contains(out, "status:       201 Created") ||
		strings.Contains(out, "ch_1") {
		t.Fatalf("show without --json or --body: exit %d\n%s", code, out)
	}
	code, out, _ = latchkey(t, "idem", "show", "--json", "--store", storeURL, "--scoped-key", rep.Key)
	if code != exitOK || !decodeJSON[idemReport](t, out).Found {
		t.Fatalf("show --scoped-key: exit %d\n%s", code, out)
	}
	code, out, errOut = latchkeyIdem(t, parts, "forget", "--yes", "--json", "--key", key)
	if code != exitOK || !decodeJSON[idemReport](t, out).Forgotten {
		t.Fatalf("forget: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := latchkeyIdem(t, parts, "show", "--json", "--key", key); code != exitNotFound ||
		decodeJSON[idemReport](t, out).Found {
		t.Fatalf("show after forget: exit %d\n%s", code, out)
	}
	if code := p.pay(key, false); code != http.StatusCreated || p.charges.Load() != 2 {
		t.Fatalf("the retry after forget: %d, %d charges; want it charged again", code, p.charges.Load())
	}
	if code, _, _ := latchkeyIdem(t, parts, "forget", "--yes", "--key", unknown); code != exitNotFound {
		t.Fatalf("forget of an unknown key: exit %d, want %d", code, exitNotFound)
	}
}

// forgetRunningPayment starts a slow payment with key: show says it is in
// progress, and forget refuses it without --force.
func forgetRunningPayment(t *testing.T, p *idemPayments, parts []string, key string) {
	t.Helper()
	done := make(chan int)
	go func() { done <- p.pay(key, true) }()
	for {
		code, out, _ := latchkeyIdem(t, parts, "show", "--json", "--key", key)
		if code == exitOK {
			if rep := decodeJSON[idemReport](t, out); rep.State != "in progress" || rep.Deadline == "" {
				t.Fatalf("show of a running payment: %+v", rep)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, _, errOut := latchkeyIdem(t, parts, "forget", "--yes", "--key", key)
	if code != exitNotFound || !strings.Contains(errOut, "--force") {
		t.Fatalf("forget of a running payment without --force: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := latchkeyIdem(t, parts, "forget", "--yes", "--force", "--key", key); code != exitOK {
		t.Fatalf("forget --force: exit %d\n%s", code, errOut)
	}
	close(p.release)
	<-done
}

// A forget that nobody confirmed changes nothing.
func TestIdemForgetNeedsConfirmation(t *testing.T) {
	t.Parallel()
	if !confirm(strings.NewReader("yes\n"), &strings.Builder{}, "?") || confirm(strings.NewReader("\n"), &strings.Builder{}, "?") ||
		confirm(strings.NewReader(""), &strings.Builder{}, "?") {
		t.Fatal("confirm takes only y or yes")
	}
	storeURL := "redis://" + testsvc.RedisAddr(t) + "/0?prefix=" + testsvc.KeyPrefix(t)
	st, err := idemurl.Open(t.Context(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _ := idemhttp.StoreKey("", "POST", "/payments", "k-1")
	c, err := st.Claim(t.Context(), key, "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Record(t.Context(), key, c.Token, []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	// A child process: its stdin is /dev/null, not a terminal.
	cmd := exec.Command(os.Args[0], "idem", "forget", "--store", storeURL, "--scoped-key", key)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "--yes") {
		t.Fatalf("forget without --yes and no terminal: %v\n%s", err, out)
	}
	if code, _, _ := latchkey(t, "idem", "show", "--store", storeURL, "--scoped-key", key); code != exitOK {
		t.Fatal("the record was forgotten without confirmation")
	}
}

// Bad input is refused with exit status 2 before any store is touched, and
// no message shows a password.
func TestInspectUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := "sqlite://" + filepath.Join(dir, "typo.db")
	long := strings.Repeat("k", 256)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"idem"}, "usage"},
		{[]string{"idem", "list"}, "unknown subcommand"},
		{[]string{"idem", "show", "--store", "mem://", "--route", "/p"}, "--key"},
		{[]string{"idem", "show", "--store", "mem://", "--key", "k"}, "--route"},
		{[]string{"idem", "show", "--store", "mem://", "--route", "/p", "--key", ""}, "missing"},
		{[]string{"idem", "show", "--store", "mem://", "--route", "/p", "--key", long}, "longer than 255"},
		{[]string{"idem", "show", "--store", "mem://", "--route", "/p", "--key", "k", "--method", "PO ST"}, "not an HTTP method"},
		{[]string{"idem", "show", "--store", "mem://", "--scoped-key", "x", "--key", "k"}, "leave out --key"},
		{[]string{"idem", "show", "--store", "mem://", "--scoped-key", strings.Repeat("x", 1025)}, "longer than 1024"},
		{[]string{"idem", "show", "--store", "mem://", "--route", "/p", "--key", "k", "--force"}, "for forget"},
		{[]string{"idem", "show", "--store", "consul://ops:hunter22@h", "--route", "/p", "--key", "k"}, "unsupported scheme"},
		{[]string{"idem", "show", "--store", missing, "--route", "/p", "--key", "k"}, "nothing was created"},
		{[]string{"dedup", "show", "--store", "mem://"}, "one message id"},
		{[]string{"dedup", "show", "m-1"}, "--store is required"},
		{[]string{"dedup", "show", "--store", "mem://", strings.Repeat("m", 1025)}, "longer than 1024"},
		{[]string{"dedup", "show", "--store", "mem://", "m\x01"}, "control character"},
		{[]string{"dedup", "show", "--store", "consul://ops:hunter22@h", "m"}, "unsupported scheme"},
		{[]string{"dedup", "show", "--store", "redis://ops:hunter22@127.0.0.1:1/0?bloom=f", "m"}, "capacity"},
		{[]string{"dedup", "show", "--store", "redis://127.0.0.1:1/0?capacity=5", "m"}, "bloom=NAME"},
		{[]string{"dedup", "show", "--store", missing, "m"}, "no such file"},
	} {
		code, out, errOut := latchkey(t, tc.args...)
		if code != exitUsage || !strings.Contains(out+errOut, tc.says) || strings.Contains(out+errOut, "hunter22") {
			t.Errorf("%q: exit %d, want %d saying %q without the password\n%s%s", tc.args, code, exitUsage, tc.says, out, errOut)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused command created %v", entries)
	}
}

// A store that cannot be reached is exit status 69, and its password is
// not shown.
func TestInspectStoreDown(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"idem", "show", "--store", "redis://ops:hunter22@127.0.0.1:1/0?dial_timeout=100ms&max_retries=-1", "--route", "/p", "--key", "k"},
		{"dedup", "show", "--store", "redis://ops:hunter22@127.0.0.1:1/0?dial_timeout=100ms&max_retries=-1", "m-1"},
		{"dedup", "forget", "--yes", "--store", "postgres://ops:hunter22@127.0.0.1:1/db?connect_timeout=1", "m-1"},
	} {
		code, out, errOut := latchkey(t, args...)
		if code != exitUnavailable || strings.Contains(out+errOut, "hunter22") {
			t.Errorf("%q: exit %d, want %d without the password\n%s%s", args, code, exitUnavailable, out, errOut)
		}
	}
}

// A message id wrongly marked done is found and forgotten on each exact
// store; a Bloom filter says "maybe seen" and cannot forget.
func TestDedupShowAndForget(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, prefix := testsvc.RedisClient(t)
	rd := redisstore.New(c, redisstore.WithPrefix(prefix+"dedup:"))
	path := filepath.Join(t.TempDir(), "inbox.db")
	myDSN := testsvc.MySQL(t)
	cfg, err := mysql.ParseDSN(myDSN)
	if err != nil {
		t.Fatal(err)
	}
	my := url.URL{Scheme: "mysql", User: url.UserPassword(cfg.User, cfg.Passwd), Host: cfg.Addr, Path: "/" + cfg.DBName, RawQuery: "table=payments_inbox"}
	redisURL := "redis://" + c.Options().Addr + "/0?prefix=" + prefix + "dedup:"
	stores := map[string]struct {
		url  string
		mark func(id string)
	}{
		"mysql": {my.String(), inboxMarker(t, "mysql", myDSN)},
		"redis": {redisURL, func(id string) {
			cl, err := rd.Claim(ctx, id, time.Minute)
			if err == nil {
				err = rd.Done(ctx, id, cl.Token, time.Hour)
			}
			if err != nil {
				t.Fatal(err)
			}
		}},
		"sqlite": {"sqlite://" + path + "?table=payments_inbox", inboxMarker(t, "sqlite", backendurl.SQLiteDSN(path))},
	}
	for name, s := range stores {
		s.mark("msg-1")
		code, out, errOut := latchkey(t, "dedup", "show", "--json", "--store", s.url, "msg-1")
		rep := decodeJSON[dedupReport](t, out)
		if code != exitOK || !rep.Found || rep.State != "done" || rep.Expires == "" {
			t.Fatalf("%s: show: exit %d %+v\n%s", name, code, rep, errOut)
		}
		if code, out, _ := latchkey(t, "dedup", "forget", "--store", s.url, "msg-1", "--yes"); code != exitOK || !strings.Contains(out, "forgotten: msg-1") {
			t.Fatalf("%s: forget: exit %d\n%s", name, code, out)
		}
		if code, out, _ := latchkey(t, "dedup", "show", "--store", s.url, "msg-1"); code != exitNotFound || !strings.Contains(out, "no mark") {
			t.Fatalf("%s: show after forget: exit %d\n%s", name, code, out)
		}
	}
	cl, err := rd.Claim(ctx, "msg-running", time.Minute)
	if err != nil || cl.State != dedup.Claimed {
		t.Fatal(cl, err)
	}
	if code, _, errOut := latchkey(t, "dedup", "forget", "--yes", "--store", redisURL, "msg-running"); code != exitNotFound || !strings.Contains(errOut, "--force") {
		t.Fatalf("forget of a claim without --force: exit %d\n%s", code, errOut)
	}
	if code, _, _ := latchkey(t, "dedup", "forget", "--yes", "--force", "--store", redisURL, "msg-running"); code != exitOK {
		t.Fatalf("forget --force: exit %d", code)
	}
	checkBloomShow(t, c, prefix)
}

// inboxMarker opens a payments_inbox through driver at dsn and returns what
// marks a message id done in it.
func inboxMarker(t *testing.T, driver, dsn string) func(id string) {
	t.Helper()
	db := testsvc.OpenDB(t, driver, dsn, testsvc.MaxOpenConns(0))
	inbox, err := sqlinbox.New(db, sqlinbox.WithTable("payments_inbox"))
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return func(id string) {
		if _, err := inbox.Process(t.Context(), dedup.Message{ID: id}, func(context.Context, *sql.Tx, dedup.Message) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// checkBloomShow checks that a Bloom filter on Redis says "maybe seen" of
// an id added to it, does not find another, and cannot forget.
func checkBloomShow(t *testing.T, c *redis.Client, prefix string) {
	t.Helper()
	f, err := bloomfilter.New(c, "orders", 1000, 0.01, bloomfilter.WithPrefix(prefix+"bloom:"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.TestAndAdd(t.Context(), "msg-1"); err != nil {
		t.Fatal(err)
	}
	bloom := "redis://" + c.Options().Addr + "/0?bloom=orders&capacity=1000&rate=0.01&prefix=" + prefix + "bloom:"
	code, out, _ := latchkey(t, "dedup", "show", "--json", "--store", bloom, "msg-1")
	rep := decodeJSON[dedupReport](t, out)
	if code != exitOK || rep.State != "maybe seen" || !rep.Approximate || rep.FillRatio == nil || *rep.FillRatio <= 0 {
		t.Fatalf("bloom show: exit %d %+v", code, rep)
	}
	if code, _, _ := latchkey(t, "dedup", "show", "--store", bloom, "msg-2"); code != exitNotFound {
		t.Fatalf("bloom show of an unseen id: exit %d", code)
	}
	if code, _, errOut := latchkey(t, "dedup", "forget", "--yes", "--store", bloom, "msg-1"); code != exitNotFound || !strings.Contains(errOut, "cannot forget") {
		t.Fatalf("bloom forget: exit %d\n%s", code, errOut)
	}
}
