package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/idemhttp/idemhttptest"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// realStores are the backends the must-have tests run on; each opens a fresh,
// test-private namespace and removes it at the end.
var realStores = teststores.Stores("idemhttp", "memory", "redis", "postgres", "sqlite")

// eachStore runs test on each of realStores, in parallel subtests.
func eachStore(t *testing.T, test func(t *testing.T, name string, store idem.Store)) {
	t.Parallel()
	for _, st := range realStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			test(t, st.Name, st.Open(t))
		})
	}
}

// payHandler charges once per call and counts the calls.
type payHandler struct {
	calls atomic.Int32
	gate  chan struct{} // if set, each call waits for it to close
}

func (p *payHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.calls.Add(1)
	if p.gate != nil {
		<-p.gate
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/charges/"+fmt.Sprint(n))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"charge":%d,"request":%q}`, n, body)
}

type resp struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, h http.Handler, method, key, auth, body string, hdr ...string) resp {
	t.Helper()
	req := httptest.NewRequest(method, "/pay?order=1001", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return resp{rec.Code, rec.Header(), rec.Body.String()}
}

func problemCode(t *testing.T, r resp) string {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("error answer has Content-Type %q, want application/problem+json", ct)
	}
	var p struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	if err := json.Unmarshal([]byte(r.body), &p); err != nil || p.Status != r.status {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	return p.Code
}

// TestConformance runs the shared HTTP suite against the middleware in real
// servers on every store: one instance, and two instances sharing the store
// with requests alternating between them.
func TestConformance(t *testing.T) {
	eachStore(t, func(t *testing.T, name string, store idem.Store) {
		up := idemhttptest.NewUpstream()
		a := httptest.NewServer(idemhttp.Middleware(store)(up))
		t.Cleanup(a.Close)
		idemhttptest.Run(t, idemhttptest.Target{URLs: []string{a.URL}, Upstream: up})
		if name == "memory" {
			return // one process: nothing to share
		}
		t.Run("two instances", func(t *testing.T) {
			t.Parallel()
			up := idemhttptest.NewUpstream()
			a := httptest.NewServer(idemhttp.Middleware(store)(up))
			t.Cleanup(a.Close)
			b := httptest.NewServer(idemhttp.Middleware(store)(up))
			t.Cleanup(b.Close)
			idemhttptest.Run(t, idemhttptest.Target{URLs: []string{a.URL, b.URL}, Upstream: up})
		})
	})
}

// A double click seen fifty times: 50 copies of one request at once run the
// handler once; each copy gets the replay or 409 (or, waiting, the replay).
func TestFiftyConcurrentCopies(t *testing.T) {
	t.Parallel()
	for _, st := range realStores {
		for _, wait := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/wait=%v", st.Name, wait), func(t *testing.T) {
				t.Parallel()
				fiftyCopies(t, st.Open(t), wait)
			})
		}
	}
}

// fiftyCopies sends 50 copies of one request at once to the middleware on
// store, waiting for the first copy's run if wait.
func fiftyCopies(t *testing.T, store idem.Store, wait bool) {
	pay := &payHandler{gate: make(chan struct{})}
	opts := []idemhttp.Option{}
	if wait {
		opts = append(opts, idemhttp.WithWait(20*time.Second))
	}
	srv := httptest.NewServer(idemhttp.Middleware(store, opts...)(pay))
	defer srv.Close()
	const n = 50
	c := copies{results: make(chan resp, n)}
	for range n {
		c.wg.Go(func() { c.send(t, srv) })
	}
	// Hold the first run until every other copy has been answered
	// (409) or is waiting, so all of them really overlap it.
	deadline := time.Now().Add(10 * time.Second)
	for pay.calls.Load() == 0 || (!wait && c.answered.Load() < n-1) {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if wait {
		time.Sleep(100 * time.Millisecond)
	}
	close(pay.gate)
	c.wg.Wait()
	close(c.results)
	if calls := pay.calls.Load(); calls != 1 {
		t.Fatalf("handler ran %d times for %d copies, want 1", calls, n)
	}
	counts := checkCopies(t, c.results, wait)
	if !wait && counts[http.StatusConflict] != n-1 {
		t.Errorf("statuses %v, want one 201 and %d 409", counts, n-1)
	}
	if wait && counts[http.StatusCreated] != n {
		t.Errorf("statuses %v, want %d replays of the 201", counts, n)
	}
}

// copies are copies of one payment request sent at once.
type copies struct {
	wg       sync.WaitGroup
	answered atomic.Int32
	results  chan resp
}

// send sends one copy to srv and passes its answer on.
func (c *copies) send(t *testing.T, srv *httptest.Server) {
	req, _ := http.NewRequest("POST", srv.URL+"/pay", strings.NewReader(`{"amount":100}`))
	req.Header.Set("Idempotency-Key", "order-1001")
	req.Header.Set("Content-Type", "application/json")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	c.answered.Add(1)
	c.results <- resp{res.StatusCode, res.Header, string(b)}
}

// checkCopies checks each copy's answer, one body for every 201 and a
// Retry-After on every 409 (none when waiting), and returns the count of
// each status.
func checkCopies(t *testing.T, results <-chan resp, wait bool) map[int]int {
	t.Helper()
	var first string
	counts := map[int]int{}
	for r := range results {
		counts[r.status]++
		switch r.status {
		case http.StatusCreated:
			if first == "" {
				first = r.body
			}
			if r.body != first {
				t.Errorf("copies got different bodies: %q and %q", r.body, first)
			}
		case http.StatusConflict:
			if wait {
				t.Error("409 in wait mode")
			}
			if r.header.Get("Retry-After") == "" {
				t.Error("409 without Retry-After")
			}
		default:
			t.Errorf("copy answered %d: %s", r.status, r.body)
		}
	}
	return counts
}

// WithPrincipal replaces the Authorization header as the scope's principal
// (the default's isolation is a case of the conformance suite).
func TestWithPrincipal(t *testing.T) {
	t.Parallel()
	byAccount := &payHandler{}
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithPrincipal(func(r *http.Request) string {
		return r.Header.Get("X-Account")
	}))(byAccount)
	do(t, h, "POST", "k", "", "{}", "X-Account", "acct-1")
	do(t, h, "POST", "k", "", "{}", "X-Account", "acct-2")
	if r := do(t, h, "POST", "k", "", "{}", "X-Account", "acct-1"); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("acct-1's copy was not replayed")
	}
	if byAccount.calls.Load() != 2 {
		t.Fatalf("WithPrincipal: handler ran %d times, want 2", byAccount.calls.Load())
	}
}

// statusHandler answers the statuses in turn and counts its runs.
func statusHandler(statuses ...int) (*atomic.Int32, http.Handler) {
	var n atomic.Int32
	return &n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		w.WriteHeader(statuses[min(i, len(statuses)-1)])
		fmt.Fprintf(w, "run %d", i+1)
	})
}

func TestStoreStatusOption(t *testing.T) {
	t.Parallel()
	runs, hh := statusHandler(502, 201)
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithStoreStatus(func(int) bool { return true }))(hh)
	do(t, h, "POST", "k", "", "{}")
	if r := do(t, h, "POST", "k", "", "{}"); r.status != 502 || r.header.Get("Idempotent-Replayed") != "true" || runs.Load() != 1 {
		t.Fatalf("stored 5xx: %d after %d runs, want the 502 replayed", r.status, runs.Load())
	}
}

// 401 and 429 stay unrecorded even when WithStoreStatus would keep everything.
func TestUnauthorizedAndTooManyOverrideStoreStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusTooManyRequests} {
		runs, hh := statusHandler(status, 201)
		h := idemhttp.Middleware(memstore.New(), idemhttp.WithStoreStatus(func(int) bool { return true }))(hh)
		do(t, h, "POST", "k", "", "{}")
		if r := do(t, h, "POST", "k", "", "{}"); r.status != 201 || runs.Load() != 2 {
			t.Fatalf("%d was stored: retry got %d after %d runs", status, r.status, runs.Load())
		}
	}
}

func TestOversizedResponseNeverReplayedTruncated(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	big := strings.Repeat("x", 100)
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithMaxResponseBody(64))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(201)
		io.WriteString(w, big[:50])
		io.WriteString(w, big[50:])
	}))
	if r := do(t, h, "POST", "k", "", "{}"); r.status != 201 || r.body != big {
		t.Fatalf("first client got %d, %d bytes; want all 100", r.status, len(r.body))
	}
	r := do(t, h, "POST", "k", "", "{}")
	if r.status != 500 || problemCode(t, r) != idemhttp.CodeNotRetained || strings.Contains(r.body, "xxx") {
		t.Fatalf("copy got %d %q, want 500 response-not-retained and no partial body", r.status, r.body)
	}
	if r.header.Get("Idempotent-Replayed") != "true" || runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
}

func TestRequestBodyCap(t *testing.T) {
	t.Parallel()
	pay := &payHandler{}
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithMaxRequestBody(10))(pay)
	if r := do(t, h, "POST", "k", "", strings.Repeat("a", 11)); r.status != http.StatusRequestEntityTooLarge || problemCode(t, r) != idemhttp.CodeBodyTooLarge {
		t.Fatalf("11-byte body = %d", r.status)
	}
	if r := do(t, h, "POST", "k", "", strings.Repeat("a", 10)); r.status != 201 || !strings.Contains(r.body, "aaaaaaaaaa") {
		t.Fatalf("10-byte body = %d %q; the handler must see the whole body", r.status, r.body)
	}
}

func TestBodyKey(t *testing.T) {
	t.Parallel()
	pay := &payHandler{}
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithBodyKey("requestId"))(pay)
	a := do(t, h, "POST", "", "", `{"requestId":"R-1","amount":100}`)
	b := do(t, h, "POST", "", "", `{"requestId":"R-1","amount":100}`)
	c := do(t, h, "POST", "", "", `{"requestId":"R-2","amount":100}`)
	if a.status != 201 || b.body != a.body || c.body == a.body || pay.calls.Load() != 2 {
		t.Fatalf("R-1, R-1, R-2 ran the handler %d times, want 2", pay.calls.Load())
	}
	if r := do(t, h, "POST", "", "", `{"amount":100}`); r.status != 400 || problemCode(t, r) != idemhttp.CodeKeyMissing {
		t.Fatalf("no requestId = %d", r.status)
	}
	if r := do(t, h, "POST", "", "", `{"requestId":42}`); r.status != 400 || problemCode(t, r) != idemhttp.CodeKeyMalformed {
		t.Fatalf("numeric requestId = %d", r.status)
	}
}

func TestKeyFunc(t *testing.T) {
	t.Parallel()
	pay := &payHandler{}
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithKeyFunc(func(r *http.Request, _ []byte) (string, error) {
		return r.URL.Query().Get("order"), nil
	}))(pay)
	do(t, h, "POST", "", "", "{}")
	do(t, h, "POST", "", "", "{}")
	if pay.calls.Load() != 1 {
		t.Fatalf("ran %d times", pay.calls.Load())
	}
}

func TestSafeMethodsAndOptionalKeyPassThrough(t *testing.T) {
	t.Parallel()
	pay := &payHandler{}
	h := idemhttp.Middleware(memstore.New())(pay)
	do(t, h, "GET", "", "", "")
	do(t, h, "GET", "", "", "")
	if pay.calls.Load() != 2 {
		t.Fatal("GET was guarded")
	}
	opt := &payHandler{}
	h = idemhttp.Middleware(memstore.New(), idemhttp.WithOptionalKey())(opt)
	do(t, h, "POST", "", "", "{}")
	do(t, h, "POST", "", "", "{}")
	if opt.calls.Load() != 2 {
		t.Fatal("keyless POST with WithOptionalKey was guarded")
	}
}

func TestHandlerContextEndsAtDeadline(t *testing.T) {
	t.Parallel()
	var dl time.Time
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithInProgress(time.Hour))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dl, _ = r.Context().Deadline()
	}))
	start := time.Now()
	do(t, h, "POST", "k", "", "{}")
	if dl.Before(start.Add(59*time.Minute)) || dl.After(time.Now().Add(time.Hour)) {
		t.Fatalf("handler deadline %v, want one hour after the claim", dl)
	}
}

// Redis unreachable: the middleware fails closed (503), it never runs the
// handler without a claim.
func TestStoreDownFailsClosed(t *testing.T) {
	t.Parallel()
	p := testsvc.NewProxy(t, testsvc.RedisAddr(t))
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	var logged atomic.Int32
	pay := &payHandler{}
	h := idemhttp.Middleware(redisstore.New(c, redisstore.WithPrefix(testsvc.KeyPrefix(t))),
		idemhttp.WithErrorHandler(func(*http.Request, error) { logged.Add(1) }))(pay)
	p.Cut()
	r := do(t, h, "POST", "k", "", "{}")
	if r.status != http.StatusServiceUnavailable || problemCode(t, r) != idemhttp.CodeStoreUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("store down = %d %s", r.status, r.body)
	}
	if pay.calls.Load() != 0 || logged.Load() == 0 {
		t.Fatalf("handler ran %d times, %d errors reported", pay.calls.Load(), logged.Load())
	}
}

// A client that hangs up mid-request does not stop the outcome from being
// recorded: the retry replays instead of charging again.
func TestRecordedAfterClientHangsUp(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	s := memstore.New()
	h := idemhttp.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(201)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, "POST", "/pay", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k")
	h = wrapCancel(h, cancel)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if ctx.Err() == nil {
		t.Fatal("the client did not hang up")
	}
	req = httptest.NewRequest("POST", "/pay", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k")
	rec := httptest.NewRecorder()
	idemhttp.Middleware(s)(http.NotFoundHandler()).ServeHTTP(rec, req)
	if rec.Code != 201 || rec.Header().Get("Idempotent-Replayed") != "true" || runs.Load() != 1 {
		t.Fatalf("retry = %d after %d runs, want the recorded 201 replayed", rec.Code, runs.Load())
	}
}

// wrapCancel cancels the request context after the handler ran but before the
// middleware records: the client went away at the worst moment.
func wrapCancel(h http.Handler, cancel func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(cancelOnWrite{w, cancel}, r)
	})
}

type cancelOnWrite struct {
	http.ResponseWriter
	cancel func()
}

func (c cancelOnWrite) WriteHeader(code int) { c.ResponseWriter.WriteHeader(code); c.cancel() }

func TestDropHeadersOption(t *testing.T) {
	t.Parallel()
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithDropHeaders("x-request-id"))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "first-request")
		w.Header().Set("X-Charge", "ch_1")
		w.WriteHeader(201)
	}))
	do(t, h, "POST", "k", "", "{}")
	r := do(t, h, "POST", "k", "", "{}")
	if r.header.Get("X-Request-Id") != "" || r.header.Get("X-Charge") != "ch_1" {
		t.Fatalf("replayed headers %v", r.header)
	}
}

// A handler that takes the connection over (websocket upgrade) has no response
// to record; its claim is released. The client reads the hijacked response
// before the handler has returned and the claim is released, so the retry
// waits for the claim instead of racing it (a 409).
func TestHijackedNotRecorded(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	srv := httptest.NewServer(idemhttp.Middleware(memstore.New(), idemhttp.WithWait(10*time.Second))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
			buf.Flush()
			conn.Close()
			return
		}
		w.WriteHeader(201)
	})))
	defer srv.Close()
	for i, want := range []int{200, 201} {
		req, _ := http.NewRequest("POST", srv.URL+"/pay", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "k")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("request %d = %d, want %d", i+1, res.StatusCode, want)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("ran %d times, want 2", runs.Load())
	}
}
