package idemhttptest

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// The first request runs, and its answer passes through untouched, cookie
// included: only replays lose it.
func testFirstRequest(t *testing.T, c *client) {
	k := newKey()
	r := c.must(req{key: k})
	if r.Status != http.StatusCreated || execution(t, r) != 1 || replayed(r) {
		t.Fatalf("first request: %d %q replayed=%v", r.Status, r.Body, replayed(r))
	}
	if r.Header.Get("Set-Cookie") == "" || r.Header.Get("X-Charge") != "ch_1" {
		t.Fatalf("first answer lost the upstream's headers: %v", r.Header)
	}
	c.wantExecutions(k, 1)
}

// Copies of a finished request get its status, headers and body again,
// marked as a replay, without Set-Cookie or hop-by-hop headers.
func testFaithfulReplay(t *testing.T, c *client) {
	k := newKey()
	first := c.must(req{key: k, auth: "Bearer replay"})
	if first.Status != http.StatusCreated {
		t.Fatalf("first = %d %q", first.Status, first.Body)
	}
	for range 3 {
		r := c.must(req{key: k, auth: "Bearer replay"})
		if r.Status != first.Status || r.Body != first.Body {
			t.Fatalf("replay = %d %q, want %d %q", r.Status, r.Body, first.Status, first.Body)
		}
		for _, h := range []string{"Content-Type", "Location", "X-Charge"} {
			if r.Header.Get(h) != first.Header.Get(h) {
				t.Errorf("replayed %s = %q, want %q", h, r.Header.Get(h), first.Header.Get(h))
			}
		}
		if !replayed(r) {
			t.Error("replay lacks Idempotent-Replayed: true")
		}
		for _, h := range []string{"Set-Cookie", "X-Hop", "Keep-Alive"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("replay carries %s: %q", h, v)
			}
		}
	}
	c.wantExecutions(k, 1)
}

// Many copies at once, spread over the instances: one execution, every other
// copy 409 with Retry-After, and the replay afterwards.
func testConcurrentCopies(t *testing.T, c *client) {
	k := newKey()
	release := c.target.Upstream.Hold(k)
	defer release()
	const n = 20
	results := make(chan Response, n)
	var answered sync.WaitGroup
	var wg sync.WaitGroup
	answered.Add(n - 1)
	for range n {
		wg.Go(func() {
			r := c.send(req{key: k})
			if r.Status == http.StatusConflict {
				answered.Done()
			}
			results <- r
		})
	}
	// Keep the one execution running until every other copy is answered.
	done := make(chan struct{})
	go func() { answered.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Error("not every copy was answered 409 while the first ran")
	}
	release()
	wg.Wait()
	close(results)
	counts := map[int]int{}
	for r := range results {
		if r.Err != nil {
			t.Fatalf("copy: %v", r.Err)
		}
		counts[r.Status]++
		if r.Status == http.StatusConflict {
			if problemCode(t, r) != idemhttp.CodeInProgress || r.Header.Get("Retry-After") == "" {
				t.Errorf("409 %q, Retry-After %q", r.Body, r.Header.Get("Retry-After"))
			}
		}
	}
	if counts[http.StatusCreated] != 1 || counts[http.StatusConflict] != n-1 {
		t.Errorf("statuses %v, want one 201 and %d 409", counts, n-1)
	}
	c.wantExecutions(k, 1)
	if r := c.must(req{key: k}); r.Status != http.StatusCreated || !replayed(r) || execution(t, r) != 1 {
		t.Fatalf("after the run: %d %q, want the replay", r.Status, r.Body)
	}
}

// A copy that arrives while the first runs gets 409; the key is not burnt:
// once the first finishes, copies replay it.
func testConflictWhileRunning(t *testing.T, c *client) {
	k := newKey()
	release := c.target.Upstream.Hold(k)
	defer release()
	first := make(chan Response, 1)
	go func() { first <- c.send(req{key: k}) }()
	deadline := time.Now().Add(15 * time.Second)
	for c.executions(k) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached the upstream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := c.must(req{key: k})
	wantProblem(t, "copy while running", r, http.StatusConflict, idemhttp.CodeInProgress)
	if r.Header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}
	release()
	if f := <-first; f.Err != nil || f.Status != http.StatusCreated {
		t.Fatalf("first = %d %v", f.Status, f.Err)
	}
	if r := c.must(req{key: k}); r.Status != http.StatusCreated || !replayed(r) {
		t.Fatalf("after the run: %d, want the replay", r.Status)
	}
	c.wantExecutions(k, 1)
}

// The same key with another body, query or content type is another request:
// 422, nothing runs.
func testFingerprintMismatch(t *testing.T, c *client) {
	k := newKey()
	c.must(req{key: k, path: "/pay?order=1"})
	for _, r := range []req{
		{key: k, path: "/pay?order=1", body: `{"amount":999}`},
		{key: k, path: "/pay?order=2"},
		{key: k, path: "/pay?order=1", ctype: "text/plain"},
	} {
		wantProblem(t, "reused key", c.must(r), http.StatusUnprocessableEntity, idemhttp.CodeFingerprintMismatch)
	}
	c.wantExecutions(k, 1)
}

// Missing, malformed and too-long keys are refused before anything runs; a
// 255-byte key is accepted.
func testBadKeys(t *testing.T, c *client) {
	for _, tc := range []struct {
		name string
		hdr  []string
		code string
	}{
		{"missing", nil, idemhttp.CodeKeyMissing},
		{"empty quoted", []string{"Idempotency-Key", `""`}, idemhttp.CodeKeyMalformed},
		{"list", []string{"Idempotency-Key", "a, b"}, idemhttp.CodeKeyMalformed},
		{"parameters", []string{"Idempotency-Key", `"a";x=1`}, idemhttp.CodeKeyMalformed},
		{"unterminated", []string{"Idempotency-Key", `"abc`}, idemhttp.CodeKeyMalformed},
		{"sent twice", []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}, idemhttp.CodeKeyMalformed},
		{"non-ASCII", []string{"Idempotency-Key", "ключ"}, idemhttp.CodeKeyMalformed},
		{"256 bytes", []string{"Idempotency-Key", strings.Repeat("k", 256)}, idemhttp.CodeKeyTooLong},
		{"256 bytes quoted", []string{"Idempotency-Key", `"` + strings.Repeat("k", 256) + `"`}, idemhttp.CodeKeyTooLong},
	} {
		wantProblem(t, tc.name, c.must(req{header: tc.hdr}), http.StatusBadRequest, tc.code)
	}
	for _, k := range []string{"", "a", "b", `"abc`, "ключ"} {
		c.wantExecutions(k, 0)
	}
	long := newKey() + strings.Repeat("k", 255-len(newKey()))
	if r := c.must(req{key: long}); r.Status != http.StatusCreated {
		t.Fatalf("255-byte key = %d %q, want accepted", r.Status, r.Body)
	}
	c.wantExecutions(long, 1)
}

// The draft's quoted form and the bare token name the same key.
func testQuotedAndBare(t *testing.T, c *client) {
	k := newKey()
	a := c.must(req{key: k})
	b := c.must(req{key: `"` + k + `"`})
	p := c.must(req{key: " \"" + k + "\"\t"})
	if a.Status != http.StatusCreated || b.Body != a.Body || p.Body != a.Body || !replayed(b) || !replayed(p) {
		t.Fatalf("bare %q, quoted %q, padded %q; want one run replayed", a.Body, b.Body, p.Body)
	}
	c.wantExecutions(k, 1)
}

// 5xx answers are not recorded: the retry runs, succeeds, and is replayed.
func testServerErrorsNotStored(t *testing.T, c *client) {
	for _, status := range []string{"500", "503"} {
		k := newKey()
		path := "/pay?fail=" + status
		if r := c.must(req{key: k, path: path}); r.Status < 500 || replayed(r) {
			t.Fatalf("first = %d, want the upstream's %s", r.Status, status)
		}
		if r := c.must(req{key: k, path: path}); r.Status != http.StatusCreated || replayed(r) || execution(t, r) != 2 {
			t.Fatalf("retry after %s = %d %q, want a second run", status, r.Status, r.Body)
		}
		if r := c.must(req{key: k, path: path}); r.Status != http.StatusCreated || !replayed(r) {
			t.Fatalf("third = %d, want the 201 replayed", r.Status)
		}
		c.wantExecutions(k, 2)
	}
}

// A handler that panics has no outcome: the client sees a failure (no
// answer, or a 5xx), and the retry runs.
func testPanicNotStored(t *testing.T, c *client) {
	k := newKey()
	path := "/pay?fail=panic"
	if r := c.send(req{key: k, path: path, fresh: true}); r.Err == nil && r.Status < 500 {
		t.Fatalf("panicking run answered %d %q", r.Status, r.Body)
	}
	if r := c.must(req{key: k, path: path}); r.Status != http.StatusCreated || replayed(r) || execution(t, r) != 2 {
		t.Fatalf("retry after panic = %d %q, want a second run", r.Status, r.Body)
	}
	c.wantExecutions(k, 2)
}

// 401 and 429 are about credentials and rate, not the operation: never
// recorded.
func testUnauthorizedAndTooMany(t *testing.T, c *client) {
	for _, status := range []string{"401", "429"} {
		k := newKey()
		path := "/pay?fail=" + status
		if r := c.must(req{key: k, path: path}); r.Status >= 500 || r.Status < 400 {
			t.Fatalf("first = %d, want %s", r.Status, status)
		}
		if r := c.must(req{key: k, path: path}); r.Status != http.StatusCreated || replayed(r) {
			t.Fatalf("retry after %s = %d, want a second run", status, r.Status)
		}
		c.wantExecutions(k, 2)
	}
}

// Other 4xx answers are final (the card was declined): replayed, not re-run.
func testClientErrorsStored(t *testing.T, c *client) {
	k := newKey()
	path := "/pay?fail=402"
	c.must(req{key: k, path: path})
	if r := c.must(req{key: k, path: path}); r.Status != http.StatusPaymentRequired || !replayed(r) {
		t.Fatalf("retry after 402 = %d, want the 402 replayed", r.Status)
	}
	c.wantExecutions(k, 1)
}

// One client never receives another's response for the same key.
func testCrossPrincipal(t *testing.T, c *client) {
	k := newKey()
	alice := c.must(req{key: k, auth: "Bearer alice"})
	bob := c.must(req{key: k, auth: "Bearer bob"})
	anon := c.must(req{key: k})
	if bob.Status != http.StatusCreated || replayed(bob) || bob.Body == alice.Body {
		t.Fatalf("bob got %q (replayed=%v), alice %q", bob.Body, replayed(bob), alice.Body)
	}
	if replayed(anon) || anon.Body == alice.Body || anon.Body == bob.Body {
		t.Fatalf("an anonymous client got a principal's response: %q", anon.Body)
	}
	if r := c.must(req{key: k, auth: "Bearer alice"}); r.Body != alice.Body || !replayed(r) {
		t.Fatalf("alice's replay = %q, want her own %q", r.Body, alice.Body)
	}
	c.wantExecutions(k, 3)
}

// GET is not guarded: each one runs, key or not.
func testSafeMethods(t *testing.T, c *client) {
	k := newKey()
	for range 2 {
		if r := c.must(req{method: http.MethodGet, key: k}); r.Status != http.StatusCreated || replayed(r) {
			t.Fatalf("GET = %d replayed=%v", r.Status, replayed(r))
		}
	}
	c.wantExecutions(k, 2)
}
