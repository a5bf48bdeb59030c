package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem/idemhttp/idemhttptest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// gatewayProc is a "latchkey gateway" child process (this test binary acting
// as the command), listening on a free loopback port.
type gatewayProc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	log  strings.Builder // stderr; guarded by mu
	done chan struct{}   // closed when the process has exited
	err  error           // Wait's result, set before done closes
}

func (g *gatewayProc) stderr() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.log.String()
}

// startGateway starts a gateway with args (--listen and --upstream are added
// unless given) and waits until it listens. env adds environment variables.
func startGateway(t *testing.T, env []string, args ...string) *gatewayProc {
	t.Helper()
	if !strings.Contains(strings.Join(args, " "), "--listen") {
		args = append(args, "--listen", "127.0.0.1:0")
	}
	cmd := exec.Command(os.Args[0], append([]string{"gateway"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProc{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			g.mu.Lock()
			g.log.WriteString(line + "\n")
			g.mu.Unlock()
			if strings.Contains(line, `msg="latchkey gateway listening"`) {
				_, rest, _ := strings.Cut(line, " addr=")
				a, _, _ := strings.Cut(rest, " ")
				addr <- a
			}
		}
		g.err = cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() { g.stop(t) })
	select {
	case a := <-addr:
		g.url = "http://" + a
	case <-g.done:
		t.Fatalf("gateway exited before listening: %v\n%s", g.err, g.stderr())
	case <-time.After(20 * time.Second):
		t.Fatalf("gateway did not listen within 20 s\n%s", g.stderr())
	}
	return g
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 15 s).
func (g *gatewayProc) stop(t *testing.T) {
	select {
	case <-g.done:
		return
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
		t.Errorf("gateway ignored SIGTERM for 15 s\n%s", g.stderr())
	}
}

// exitCode waits for the process to end and returns its status.
func (g *gatewayProc) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-g.done:
	case <-time.After(within):
		t.Fatalf("gateway still running after %v\n%s", within, g.stderr())
	}
	var ee *exec.ExitError
	if errors.As(g.err, &ee) {
		return ee.ExitCode()
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	return 0
}

// upstreamServer serves up on loopback for the test's lifetime.
func upstreamServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// writeConfig writes a gateway config file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// conformanceConfig makes the gateway guard as idemhttp.Middleware does by
// default: POST and PATCH need a key.
const conformanceConfig = `{"rules": [{"methods": ["POST", "PATCH"], "path": "/", "key": "required"}]}`

// redisStoreURL returns a redis:// store URL with a test-private prefix whose
// keys are deleted when the test ends.
func redisStoreURL(t *testing.T) string {
	t.Helper()
	addr := testsvc.RedisAddr(t)
	prefix := testsvc.KeyPrefix(t)
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return "redis://" + addr + "/0?prefix=" + prefix
}

// TestGatewayConformanceRedis runs the HTTP conformance suite against two
// gateway processes sharing the real Redis, in front of one upstream:
// consecutive requests of each case alternate between the two.
func TestGatewayConformanceRedis(t *testing.T) {
	t.Parallel()
	up := idemhttptest.NewUpstream()
	srv := upstreamServer(t, up)
	store := redisStoreURL(t)
	cfg := writeConfig(t, conformanceConfig)
	a := startGateway(t, nil, "--upstream", srv.URL, "--store", store, "--config", cfg)
	b := startGateway(t, nil, "--upstream", srv.URL, "--store", store, "--config", cfg)
	idemhttptest.Run(t, idemhttptest.Target{URLs: []string{a.url, b.url}, Upstream: up})
}

// TestGatewayConformanceSQLite runs the suite against one gateway on its
// default store, an SQLite file in the user's cache directory.
func TestGatewayConformanceSQLite(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	up := idemhttptest.NewUpstream()
	srv := upstreamServer(t, up)
	g := startGateway(t, []string{"XDG_CACHE_HOME=" + cache, "HOME=" + cache},
		"--upstream", srv.URL, "--config", writeConfig(t, conformanceConfig))
	t.Run("suite", func(t *testing.T) {
		idemhttptest.Run(t, idemhttptest.Target{URLs: []string{g.url}, Upstream: up})
	})
	if _, err := os.Stat(filepath.Join(cache, "latchkey", "gateway.db")); err != nil {
		t.Errorf("default store file: %v", err)
	}
}

// recorder is an upstream that keeps the headers of the requests it gets.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	seen []http.Header // guarded by mu
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.seen = append(rc.seen, r.Header.Clone())
	rc.mu.Unlock()
	rc.next.ServeHTTP(w, r)
}

func (rc *recorder) last() (int, http.Header) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.seen) == 0 {
		return 0, nil
	}
	return len(rc.seen), rc.seen[len(rc.seen)-1]
}

type answer struct {
	status int
	header http.Header
	body   string
}

func send(t *testing.T, method, url, key string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(`{"amount":100}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header, string(b)}
}

// Without a config file, POST and PATCH with a key are guarded and every
// other request passes through; hop-by-hop headers stop at the gateway,
// X-Forwarded-* are set, the admin endpoints are never proxied, and the log
// says whether a key was present without showing it.
func TestGatewayDefaults(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	up := idemhttptest.NewUpstream()
	rec := &recorder{next: up}
	srv := upstreamServer(t, rec)
	g := startGateway(t, []string{"XDG_CACHE_HOME=" + cache, "HOME=" + cache}, "--upstream", srv.URL)

	for range 2 {
		if a := send(t, "POST", g.url+"/pay", ""); a.status != http.StatusCreated || a.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("keyless POST = %d %q", a.status, a.body)
		}
	}
	if n := up.Executions(""); n != 2 {
		t.Fatalf("keyless POSTs ran %d times, want 2 (passed through)", n)
	}
	const secret = "key-that-must-not-be-logged-1234"
	for _, m := range []string{"POST", "PATCH"} {
		k := secret + "-" + m
		send(t, m, g.url+"/pay", k)
		if a := send(t, m, g.url+"/pay", k); a.header.Get("Idempotent-Replayed") != "true" || up.Executions(k) != 1 {
			t.Fatalf("%s with a key: second = %d replayed=%q after %d runs", m, a.status, a.header.Get("Idempotent-Replayed"), up.Executions(k))
		}
	}
	send(t, "PUT", g.url+"/pay", "put-key")
	send(t, "PUT", g.url+"/pay", "put-key")
	if n := up.Executions("put-key"); n != 2 {
		t.Fatalf("PUT ran %d times, want 2 (not guarded by default)", n)
	}
	checkForwarding(t, g, rec)
	checkKeyNotShown(t, g, secret)
}

// checkForwarding checks that hop-by-hop headers stop at g, X-Forwarded-*
// are set, and the admin endpoints are never proxied to rec.
func checkForwarding(t *testing.T, g *gatewayProc, rec *recorder) {
	t.Helper()
	send(t, "POST", g.url+"/pay", "hop", "Connection", "X-Private-Hop", "X-Private-Hop", "v", "Keep-Alive", "timeout=5",
		"X-Forwarded-For", "203.0.113.9")
	_, h := rec.last()
	if h.Get("X-Private-Hop") != "" || h.Get("Keep-Alive") != "" || h.Get("Connection") != "" {
		t.Errorf("hop-by-hop headers reached the upstream: %v", h)
	}
	if h.Get("X-Forwarded-For") != "127.0.0.1" || h.Get("X-Forwarded-Host") != strings.TrimPrefix(g.url, "http://") ||
		h.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("X-Forwarded-*: %q %q %q", h.Get("X-Forwarded-For"), h.Get("X-Forwarded-Host"), h.Get("X-Forwarded-Proto"))
	}

	before, _ := rec.last()
	for path, want := range map[string]int{"healthz": 200, "readyz": 200, "nope": 404} {
		if a := send(t, "GET", g.url+"/_latchkey/"+path, ""); a.status != want {
			t.Errorf("/_latchkey/%s = %d %q, want %d", path, a.status, a.body, want)
		}
	}
	if after, _ := rec.last(); after != before {
		t.Error("an admin endpoint was proxied")
	}
}

// checkKeyNotShown checks that the guarded requests TestGatewayDefaults
// sent are counted by outcome under the rule's label and logged, and that
// neither the metrics nor the log show secret, a key they used.
func checkKeyNotShown(t *testing.T, g *gatewayProc, secret string) {
	t.Helper()
	m := send(t, "GET", g.url+"/_latchkey/metrics", "")
	for _, want := range []string{`latchkey_idem_requests_total{handler="`, `outcome="executed"} 3`, `outcome="replayed"} 2`, `outcome="unkeyed"} 2`} {
		if m.status != http.StatusOK || !strings.Contains(m.body, want) {
			t.Errorf("/_latchkey/metrics = %d, missing %q:\n%s", m.status, want, m.body)
		}
	}
	if strings.Contains(m.body, secret) {
		t.Error("the metrics show an idempotency key")
	}

	log := g.stderr()
	if !strings.Contains(log, "msg=request method=POST path=/pay status=201") || !strings.Contains(log, "key=true") ||
		!strings.Contains(log, "key=false") {
		t.Errorf("request log lines missing:\n%s", log)
	}
	if strings.Contains(log, secret) {
		t.Error("the log shows an idempotency key")
	}
}

// An upstream that cannot be reached gives 502 problem+json that is not
// recorded: once the upstream is up, the retry runs. readyz follows the
// upstream with --ready-upstream.
func TestGatewayUpstreamDown(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	port := testsvc.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	g := startGateway(t, []string{"XDG_CACHE_HOME=" + cache, "HOME=" + cache},
		"--upstream", "http://"+addr, "--ready-upstream")
	a := send(t, "POST", g.url+"/pay", "down-1")
	if a.status != http.StatusBadGateway || a.header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(a.body, `"code":"upstream-unavailable"`) {
		t.Fatalf("upstream down = %d %q", a.status, a.body)
	}
	if r := send(t, "GET", g.url+"/_latchkey/readyz", ""); r.status != http.StatusServiceUnavailable {
		t.Errorf("readyz with the upstream down = %d", r.status)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("upstream port taken meanwhile: %v", err)
	}
	up := idemhttptest.NewUpstream()
	srv := &http.Server{Handler: up}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	if a := send(t, "POST", g.url+"/pay", "down-1"); a.status != http.StatusCreated || a.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after the upstream came up = %d %q, want a first run", a.status, a.body)
	}
	if n := up.Executions("down-1"); n != 1 {
		t.Fatalf("ran %d times", n)
	}
	if r := send(t, "GET", g.url+"/_latchkey/readyz", ""); r.status != http.StatusOK {
		t.Errorf("readyz with the upstream up = %d", r.status)
	}
}

// waitRunning waits until the upstream has started an execution for key.
func waitRunning(t *testing.T, up *idemhttptest.Upstream, key string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the request to reach the upstream", func() bool { return up.Executions(key) > 0 })
}

// TestGatewayShutdown sends SIGTERM to a gateway while a request is in
// flight. Within the grace period the request completes and its answer is
// recorded: the other gateway replays it. Past the grace period the process
// exits, and the key is retryable on the other gateway no later than its
// in-progress deadline, never earlier (no second execution while the first
// may still run) and never a 409 forever.
func TestGatewayShutdown(t *testing.T) {
	t.Parallel()
	up := idemhttptest.NewUpstream()
	srv := upstreamServer(t, up)
	store := redisStoreURL(t)
	sd := &shutdown{up: up, args: []string{"--upstream", srv.URL, "--store", store, "--in-progress", shutdownInProgress.String()}}
	sd.other = startGateway(t, nil, sd.args...)
	t.Run("in flight completes", sd.inFlightCompletes)
	t.Run("grace runs out", sd.graceRunsOut)
}

// shutdownInProgress is the gateways' in-progress deadline in
// TestGatewayShutdown.
const shutdownInProgress = 2 * time.Second

// shutdown is TestGatewayShutdown's setting: a gateway is stopped with a
// request in flight to up, and the other gateway, sharing its store, gets
// the copy.
type shutdown struct {
	up    *idemhttptest.Upstream
	args  []string // a gateway's, without --grace
	other *gatewayProc
}

func (sd *shutdown) inFlightCompletes(t *testing.T) {
	a := startGateway(t, nil, append(sd.args, "--grace", "20s")...)
	release := sd.up.Hold("finish")
	defer release()
	first := make(chan answer, 1)
	go func() { first <- send(t, "POST", a.url+"/pay", "finish") }()
	waitRunning(t, sd.up, "finish")
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // SIGTERM handled, listener closed
	if res, err := http.Get(a.url + "/_latchkey/healthz"); err == nil {
		res.Body.Close()
		t.Error("a draining gateway accepted a new connection")
	}
	release()
	if f := <-first; f.status != http.StatusCreated {
		t.Fatalf("request in flight at SIGTERM = %d %q", f.status, f.body)
	}
	if code := a.exitCode(t, 10*time.Second); code != exitOK {
		t.Errorf("exit status %d after SIGTERM", code)
	}
	if r := send(t, "POST", sd.other.url+"/pay", "finish"); r.status != http.StatusCreated || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("other gateway = %d replayed=%q, want the recorded answer", r.status, r.header.Get("Idempotent-Replayed"))
	}
	if n := sd.up.Executions("finish"); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

func (sd *shutdown) graceRunsOut(t *testing.T) {
	a := startGateway(t, nil, append(sd.args, "--grace", "300ms")...)
	release := sd.up.Hold("cut")
	defer release()
	go func() {
		req, _ := http.NewRequest("POST", a.url+"/pay", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Idempotency-Key", "cut")
		req.Header.Set("Content-Type", "application/json")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	waitRunning(t, sd.up, "cut")
	claimed := time.Now() // the claim was made before this
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.exitCode(t, 10*time.Second); code != exitOK {
		t.Errorf("exit status %d after SIGTERM", code)
	}
	if !strings.Contains(a.stderr(), "grace period over") {
		t.Errorf("no word of the abandoned request:\n%s", a.stderr())
	}
	release()
	if r := send(t, "POST", sd.other.url+"/pay", "cut"); r.status != http.StatusConflict || r.header.Get("Retry-After") == "" {
		t.Fatalf("copy right after the exit = %d %q, want 409 until the in-progress deadline", r.status, r.body)
	}
	sd.retryUntilRun(t, "cut", claimed)
	if n := sd.up.Executions("cut"); n != 2 {
		t.Fatalf("ran %d times, want 2 (the abandoned run and the retry)", n)
	}
}

// retryUntilRun sends the copy of key to the other gateway until it runs,
// which must be no later than the in-progress deadline of the claim made
// before claimed; until then every answer is 409.
func (sd *shutdown) retryUntilRun(t *testing.T, key string, claimed time.Time) {
	t.Helper()
	limit := claimed.Add(shutdownInProgress + 3*time.Second)
	for {
		r := send(t, "POST", sd.other.url+"/pay", key)
		if r.status == http.StatusCreated {
			return
		}
		if r.status != http.StatusConflict {
			t.Fatalf("retry = %d %q", r.status, r.body)
		}
		if time.Now().After(limit) {
			t.Fatalf("still 409 %v after the claim; its in-progress deadline is %v", time.Since(claimed), shutdownInProgress)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Bad input exits 2 with a message naming what is wrong, before anything
// starts; an unreachable store exits 69. Passwords are never printed.
func TestGatewayUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := func(body string) string { return writeConfig(t, body) }
	up := "http://127.0.0.1:9"
	mem := "mem://"
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no upstream", []string{"--store", mem}, exitUsage, "--upstream is required"},
		{"bad upstream scheme", []string{"--upstream", "ftp://x", "--store", mem}, exitUsage, "scheme must be http or https"},
		{"upstream without host", []string{"--upstream", "http:///x", "--store", mem}, exitUsage, "no host"},
		{"extra argument", []string{"--upstream", up, "x"}, exitUsage, `unexpected argument "x"`},
		{"negative grace", []string{"--upstream", up, "--store", mem, "--grace", "-1s"}, exitUsage, "--grace"},
		{"bad in-progress", []string{"--upstream", up, "--store", mem, "--in-progress", "0s"}, exitUsage, "in_progress"},
		{"wait not below in-progress", []string{"--upstream", up, "--store", mem, "--wait", "2m"}, exitUsage, "wait"},
		{"unknown store", []string{"--upstream", up, "--store", "consul://u:hunter22@h"}, exitUsage, "supported: mem://"},
		{"store down", []string{"--upstream", up, "--store", "redis://u:hunter22@127.0.0.1:1/0?dial_timeout=200ms"}, exitUnavailable, "127.0.0.1:1"},
		{"missing config", []string{"--upstream", up, "--config", filepath.Join(dir, "nope.json")}, exitUsage, "nope.json"},
		{"unknown field", []string{"--upstream", up, "--config", cfg(`{"rules":[{"pathh":"/"}]}`)}, exitUsage, `unknown field "pathh"`},
		{"bad duration", []string{"--upstream", up, "--config", cfg(`{"retention":"forever"}`)}, exitUsage, `retention: "forever"`},
		{"bad rule duration", []string{"--upstream", up, "--config", cfg(`{"rules":[{"wait":5}]}`)}, exitUsage, `rules[0].wait: "5"`},
		{"bad pattern", []string{"--upstream", up, "--config", cfg(`{"rules":[{"path":"/a/{x"}]}`)}, exitUsage, "rules[0].path"},
		{"method in path", []string{"--upstream", up, "--config", cfg(`{"rules":[{"path":"POST /a"}]}`)}, exitUsage, "rules[0].path"},
		{"bad method", []string{"--upstream", up, "--config", cfg(`{"rules":[{},{"methods":["post"]}]}`)}, exitUsage, "rules[1].methods"},
		{"bad key mode", []string{"--upstream", up, "--config", cfg(`{"rules":[{"key":"maybe"}]}`)}, exitUsage, "rules[0].key"},
		{"two key sources", []string{"--upstream", up, "--config", cfg(`{"rules":[{"header":"K","body_key":"id"}]}`)}, exitUsage, "rules[0]"},
		{"bad header", []string{"--upstream", up, "--config", cfg(`{"rules":[{"principal_header":"X Account"}]}`)}, exitUsage, "rules[0].principal_header"},
		{"type", []string{"--upstream", up, "--config", cfg(`{"rules":[{"methods":"POST"}]}`)}, exitUsage, "rules.methods"},
		// Flags win over the file: the file's upstream is bad but the flag's
		// is used (the store is what fails), and the file's in_progress
		// meets the flag's wait.
		{"flag over file", []string{"--upstream", up, "--store", "consul://h", "--config", cfg(`{"upstream":"ftp://bad"}`)}, exitUsage, "supported: mem://"},
		{"file and flag combine", []string{"--wait", "10s", "--config", cfg(`{"upstream":"http://127.0.0.1:9","in_progress":"5s"}`)}, exitUsage, "10s is not shorter than in_progress 5s"},
		{"trailing data", []string{"--upstream", up, "--config", cfg(`{} {}`)}, exitUsage, "after the configuration"},
		{"zero request body cap", []string{"--upstream", up, "--store", mem, "--max-request-body", "0"}, exitUsage, "(max_request_body): 0 bytes"},
		{"huge response body cap", []string{"--upstream", up, "--store", mem, "--max-response-body", "4294967296"}, exitUsage, "(max_response_body): 4294967296 bytes"},
		{"bad rule body cap", []string{"--upstream", up, "--config", cfg(`{"rules":[{},{"max_response_body":-5}]}`)}, exitUsage, "rules[1].max_response_body: -5"},
		{"body cap type", []string{"--upstream", up, "--config", cfg(`{"max_request_body":"1MB"}`)}, exitUsage, "max_request_body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := latchkey(t, append([]string{"gateway"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit %d, want %d; stderr should say %q:\n%s", code, tc.code, tc.says, errOut)
			}
			if strings.Contains(out+errOut, "hunter22") {
				t.Error("password printed")
			}
			if strings.Contains(errOut, "listening") {
				t.Error("the gateway started")
			}
		})
	}
}

// A flag given on the command line wins over the file also when it turns a
// setting off: with ready_upstream in the file and --ready-upstream=false,
// readyz does not ask the upstream, so a gateway whose upstream is down
// still reports ready.
func TestGatewayFlagTurnsFileSettingOff(t *testing.T) {
	t.Parallel()
	down := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(testsvc.FreePort(t)))
	cfg := writeConfig(t, `{"ready_upstream": true}`)
	g := startGateway(t, nil, "--upstream", down, "--store", "mem://", "--config", cfg, "--ready-upstream=false")
	if r := send(t, "GET", g.url+"/_latchkey/readyz", ""); r.status != http.StatusOK {
		t.Errorf("readyz = %d %q, want 200: --ready-upstream=false should win over the file", r.status, r.body)
	}
}
