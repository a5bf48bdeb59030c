package gateway

import (
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/idemhttp/idemhttptest"
	"github.com/latchkey-go/latchkey/idem/idemurl"
)

// newTestGateway builds the gateway in this process on a memory store, with
// the given rules, in front of up.
func newTestGateway(t *testing.T, up http.Handler, rules ...ruleConfig) http.Handler {
	t.Helper()
	st, err := idemurl.Open(t.Context(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	target, err := checkUpstream(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	top := defaultSettings()
	top.InProgress, top.Retention = time.Minute, time.Hour
	var rs []*rule
	for i, rc := range rules {
		s := parseRule("rules["+strconv.Itoa(i)+"]", rc, top)
		if err := s.validate(); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, s.build(func(*http.Request, error) {}))
	}
	return newGateway(st, target, rs, slog.New(slog.DiscardHandler), false, nil)
}

// configOf parses args as the gateway's command line and returns its Config.
func configOf(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	cl := Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cl.Config()
}

// Rules apply in order, the first match wins; each sets where the key comes
// from, whether it is required, and the principal.
func TestRules(t *testing.T) {
	t.Parallel()
	up := idemhttptest.NewUpstream()
	gw := newTestGateway(t, up,
		ruleConfig{Methods: []string{"POST"}, Path: "/webhooks/", Key: "off"},
		ruleConfig{Methods: []string{"POST"}, Path: "/orders/{id}/submit", BodyKey: "requestId", limits: limits{Wait: duration{set: true}}},
		ruleConfig{Methods: []string{"POST"}, Path: "/payments/", Header: "X-Request-Id", PrincipalHeader: "X-Account"},
		ruleConfig{Methods: []string{"POST", "PUT"}, Path: "/", Key: "required"},
	)
	do := func(method, path, body string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)
		return rec
	}
	replayed := func(r *httptest.ResponseRecorder) bool { return r.Header().Get("Idempotent-Replayed") == "true" }

	// "off": never guarded, even with a key.
	do("POST", "/webhooks/stripe", "{}", "Idempotency-Key", "wh")
	if r := do("POST", "/webhooks/stripe", "{}", "Idempotency-Key", "wh"); replayed(r) || up.Executions("wh") != 2 {
		t.Errorf("key off: replayed=%v after %d runs", replayed(r), up.Executions("wh"))
	}
	// Body key on a wildcard route; a path the pattern does not match falls
	// to the catch-all rule, which needs a header key.
	do("POST", "/orders/7/submit", `{"requestId":"R-1"}`)
	if r := do("POST", "/orders/7/submit", `{"requestId":"R-1"}`); !replayed(r) || r.Code != http.StatusCreated {
		t.Errorf("body key: second = %d replayed=%v", r.Code, replayed(r))
	}
	if r := do("POST", "/orders/7/submit", `{"amount":1}`); r.Code != http.StatusBadRequest {
		t.Errorf("body key missing = %d, want 400", r.Code)
	}
	if r := do("POST", "/orders/7/submit/extra", `{"requestId":"R-1"}`); r.Code != http.StatusBadRequest ||
		!strings.Contains(r.Body.String(), idemhttp.CodeKeyMissing) {
		t.Errorf("unmatched path = %d %s, want the catch-all's 400", r.Code, r.Body)
	}
	// Another header, scoped by the X-Account principal.
	do("POST", "/payments/1", "{}", "X-Request-Id", "p-1", "X-Account", "acct-1")
	if r := do("POST", "/payments/1", "{}", "X-Request-Id", "p-1", "X-Account", "acct-1"); !replayed(r) {
		t.Error("X-Request-Id key: copy not replayed")
	}
	if r := do("POST", "/payments/1", "{}", "X-Request-Id", "p-1", "X-Account", "acct-2"); replayed(r) || r.Code != http.StatusCreated {
		t.Errorf("another account got a replay: %d replayed=%v", r.Code, replayed(r))
	}
	// The catch-all guards PUT as configured; GET matches no rule.
	do("PUT", "/items/1", "{}", "Idempotency-Key", "put-1")
	if r := do("PUT", "/items/1", "{}", "Idempotency-Key", "put-1"); !replayed(r) || up.Executions("put-1") != 1 {
		t.Error("PUT under the catch-all rule not guarded")
	}
	if r := do("GET", "/items/1", "", "Idempotency-Key", "get-1"); r.Code != http.StatusCreated {
		t.Errorf("GET = %d", r.Code)
	}
}

// The example config file in testdata is valid, and every value in it
// arrives in the Config.
func TestExampleConfig(t *testing.T) {
	t.Parallel()
	c, err := configOf(t, "--config", filepath.Join("testdata", "gateway.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.rules) != 4 || c.Store == "" || !c.ReadyUpstream || c.InProgress != time.Minute ||
		c.rules[0].limits.InProgress != 30*time.Second || c.rules[0].limits.MaxRequestBody != 65536 ||
		c.rules[1].limits.InProgress != time.Minute || c.rules[1].limits.Wait != 5*time.Second {
		t.Errorf("example config: %+v", c)
	}
}

// Flags given on the command line win over the file, each one alone: a flag
// left out keeps the file's value, and a value the file leaves out is the
// flag's default.
func TestFlagsOverFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "gateway.json")
	writeFile(t, file, `{"listen": "127.0.0.1:9999", "upstream": "http://file:1", "store": "mem://",
		"ready_upstream": true, "in_progress": "5m", "retention": "2h", "max_request_body": 10}`)
	c, err := configOf(t, "--config", file, "--upstream", "http://flag:2", "--retention", "3h",
		"--ready-upstream=false", "--max-response-body", "20")
	if err != nil {
		t.Fatal(err)
	}
	want := defaultSettings()
	want.Listen, want.Upstream, want.Store = "127.0.0.1:9999", "http://flag:2", "mem://"
	want.InProgress, want.Retention = 5*time.Minute, 3*time.Hour
	want.MaxRequestBody, want.MaxResponseBody = 10, 20
	if c.settings != want {
		t.Errorf("merged\n%+v\nwant\n%+v", c.settings, want)
	}
	if c.target.Host != "flag:2" || c.rules[0].limits.Retention != 3*time.Hour {
		t.Errorf("target %v, default rule %+v", c.target, c.rules[0])
	}
}

// Body caps, per rule: a request body over the cap gets 413 and never runs;
// a response over the cap reaches its client once, and a copy gets 500
// response-not-retained instead of a second run.
func TestBodyCaps(t *testing.T) {
	t.Parallel()
	up := idemhttptest.NewUpstream()
	small := int64(16)
	gw := newTestGateway(t, up,
		ruleConfig{Path: "/small-request/", limits: limits{MaxRequestBody: &small}},
		ruleConfig{Path: "/small-response/", limits: limits{MaxResponseBody: &small}},
		ruleConfig{Path: "/"},
	)
	do := func(path, key, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)
		return rec
	}
	big := `{"amount":1000,"currency":"EUR","note":"more than sixteen bytes"}`
	if r := do("/small-request/1", "req-big", big); r.Code != http.StatusRequestEntityTooLarge || up.Executions("req-big") != 0 {
		t.Errorf("body over the rule's cap = %d after %d runs, want 413 and none", r.Code, up.Executions("req-big"))
	}
	if r := do("/small-request/1", "req-small", `{"amount":1}`); r.Code != http.StatusCreated {
		t.Errorf("body under the rule's cap = %d, want 201", r.Code)
	}
	if r := do("/other", "req-default", big); r.Code != http.StatusCreated {
		t.Errorf("the same body under the default 1 MiB cap = %d, want 201", r.Code)
	}
	first := do("/small-response/1", "resp-big", big)
	if first.Code != http.StatusCreated || first.Body.Len() <= int(small) {
		t.Fatalf("first request = %d with %d bytes, want 201 and the whole response", first.Code, first.Body.Len())
	}
	if r := do("/small-response/1", "resp-big", big); r.Code != http.StatusInternalServerError ||
		!strings.Contains(r.Body.String(), idemhttp.CodeNotRetained) || up.Executions("resp-big") != 1 {
		t.Errorf("copy of a response over the cap = %d %s after %d runs, want 500 %s and one run",
			r.Code, r.Body, up.Executions("resp-big"), idemhttp.CodeNotRetained)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
