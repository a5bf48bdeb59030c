// Package idemhttptest is the black-box conformance suite for the HTTP face
// of idempotency: the idemhttp middleware in a server, and any proxy that
// claims the same semantics (the latchkey gateway). It speaks only HTTP to
// the target, over real sockets, and counts what reached the application
// behind it.
//
//	up := idemhttptest.NewUpstream()
//	srv := httptest.NewServer(idemhttp.Middleware(store)(up))
//	idemhttptest.Run(t, idemhttptest.Target{URLs: []string{srv.URL}, Upstream: up})
//
// The target must guard POST requests to /pay with the default settings of
// idemhttp.Middleware: key required in the Idempotency-Key header, scoped by
// the Authorization header, 409 (no waiting) while a copy runs, responses
// below 500 recorded. Given several URLs (instances sharing one store),
// consecutive requests of each case go to the next instance in turn.
package idemhttptest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// Target is what Run tests.
type Target struct {
	// URLs are the base URLs ("http://127.0.0.1:8080") of one or more
	// instances that share one store, all in front of Upstream.
	URLs []string
	// Upstream is the application the instances forward guarded requests to.
	Upstream *Upstream
	// Client sends the requests. Default: a client with a 30 s timeout.
	Client *http.Client
}

// Response is an answer as a client saw it.
type Response struct {
	Status int
	Header http.Header
	Body   string
	Err    error // a transport error: no answer at all
}

// Run checks the HTTP idempotency semantics against target, one parallel
// subtest per case of the DESIGN table.
func Run(t *testing.T, target Target) {
	t.Helper()
	if len(target.URLs) == 0 || target.Upstream == nil {
		t.Fatal("idemhttptest: Target needs URLs and an Upstream")
	}
	if target.Client == nil {
		target.Client = &http.Client{Timeout: 30 * time.Second}
	}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *client)
	}{
		{"FirstRequest", testFirstRequest},
		{"FaithfulReplay", testFaithfulReplay},
		{"ConcurrentCopiesOneExecution", testConcurrentCopies},
		{"ConflictWhileRunning", testConflictWhileRunning},
		{"FingerprintMismatch", testFingerprintMismatch},
		{"BadKeys", testBadKeys},
		{"QuotedAndBareKeysEqual", testQuotedAndBare},
		{"ServerErrorsNotStored", testServerErrorsNotStored},
		{"PanicNotStored", testPanicNotStored},
		{"UnauthorizedAndTooManyNeverStored", testUnauthorizedAndTooMany},
		{"ClientErrorsStored", testClientErrorsStored},
		{"CrossPrincipalIsolation", testCrossPrincipal},
		{"SafeMethodsPassThrough", testSafeMethods},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, &client{t: t, target: target})
		})
	}
}

// client sends a case's requests, each to the next instance in turn.
type client struct {
	t      *testing.T
	target Target
	next   atomic.Int64
}

// req describes one request; the zero value is POST /pay with body {}.
type req struct {
	method string
	path   string // default /pay
	key    string // the header's raw value; "" sends none
	auth   string
	body   string
	ctype  string
	header []string // more header lines, name then value
	// fresh sends on a new connection. net/http's client resends a request
	// that carries an Idempotency-Key when a reused connection drops before
	// the answer; a fresh connection shows the client the failure itself.
	fresh bool
}

func (c *client) send(r req) Response {
	c.t.Helper()
	base := c.target.URLs[int(c.next.Add(1)-1)%len(c.target.URLs)]
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/pay"
	}
	if r.body == "" && r.method != http.MethodGet {
		r.body = `{"amount":100}`
	}
	hr, err := http.NewRequestWithContext(c.t.Context(), r.method, base+r.path, strings.NewReader(r.body))
	if err != nil {
		c.t.Fatal(err)
	}
	if r.ctype == "" {
		r.ctype = "application/json"
	}
	hr.Header.Set("Content-Type", r.ctype)
	if r.key != "" {
		hr.Header.Set(idemhttp.DefaultHeader, r.key)
	}
	if r.auth != "" {
		hr.Header.Set("Authorization", r.auth)
	}
	for i := 0; i+1 < len(r.header); i += 2 {
		hr.Header.Add(r.header[i], r.header[i+1])
	}
	hc := c.target.Client
	if r.fresh {
		hc = &http.Client{Timeout: hc.Timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	}
	res, err := hc.Do(hr)
	if err != nil {
		return Response{Err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(b), Err: err}
}

// must is send that fails the test on a transport error.
func (c *client) must(r req) Response {
	c.t.Helper()
	res := c.send(r)
	if res.Err != nil {
		c.t.Fatalf("%s %s: %v", r.method, r.path, res.Err)
	}
	return res
}

func (c *client) executions(key string) int { return c.target.Upstream.Executions(key) }

func (c *client) wantExecutions(key string, want int) {
	c.t.Helper()
	if got := c.executions(key); got != want {
		c.t.Fatalf("the upstream ran %d times for the key, want %d", got, want)
	}
}

func newKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "k-" + hex.EncodeToString(b[:])
}

// execution reads the execution number from the upstream's JSON body.
func execution(t *testing.T, r Response) int {
	t.Helper()
	var v struct {
		Execution int `json:"execution"`
	}
	if err := json.Unmarshal([]byte(r.Body), &v); err != nil || v.Execution == 0 {
		t.Fatalf("answer %d is not the upstream's: %q", r.Status, r.Body)
	}
	return v.Execution
}

// problemCode checks an error answer is problem+json matching its status and
// returns its code.
func problemCode(t *testing.T, r Response) string {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("error answer %d has Content-Type %q, want application/problem+json: %q", r.Status, ct, r.Body)
	}
	var p struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	if err := json.Unmarshal([]byte(r.Body), &p); err != nil || p.Status != r.Status {
		t.Fatalf("problem body %q: %v", r.Body, err)
	}
	return p.Code
}

func wantProblem(t *testing.T, what string, r Response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: %d %q, want %d %s", what, r.Status, r.Body, status, code)
	}
	if got := problemCode(t, r); got != code {
		t.Fatalf("%s: code %q, want %q", what, got, code)
	}
}

func replayed(r Response) bool { return r.Header.Get("Idempotent-Replayed") == "true" }
