package idemhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

func TestRequireToken(t *testing.T) {
	eachStore(t, func(t *testing.T, _ string, store idem.Store) {
		ts, ok := store.(idem.TokenStore)
		if !ok {
			t.Skip("store keeps no tokens")
		}
		requireToken(t, ts)
	})
}

// requireToken places orders through RequireToken on ts: each token, bound
// to its user's checkout, places one order, in a header or a form.
func requireToken(t *testing.T, ts idem.TokenStore) {
	var orders atomic.Int32
	h := idemhttp.RequireToken(ts, idemhttp.WithTokenBind(func(r *http.Request) string {
		return r.Header.Get("X-User") + "/checkout"
	}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	ctx := context.Background()
	tok, err := idem.IssueToken(ctx, ts, "alice/checkout", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r := submit(h, tok, "alice", false); r.status != 201 {
		t.Fatalf("first submit = %d %s", r.status, r.body)
	}
	if r := submit(h, tok, "alice", false); r.status != http.StatusConflict || problemCode(t, r) != idemhttp.CodeTokenUsed {
		t.Fatalf("double submit = %d, want 409 submit-token-used", r.status)
	}
	formTok, _ := idem.IssueToken(ctx, ts, "alice/checkout", time.Minute)
	if r := submit(h, formTok, "alice", true); r.status != 201 {
		t.Fatalf("form submit = %d %s", r.status, r.body)
	}
	if r := submit(h, formTok, "alice", true); r.status != http.StatusConflict {
		t.Fatalf("double form submit = %d", r.status)
	}
	bobs, _ := idem.IssueToken(ctx, ts, "bob/checkout", time.Minute)
	if r := submit(h, bobs, "mallory", false); r.status != http.StatusConflict {
		t.Fatalf("another user's token = %d, want 409", r.status)
	}
	if r := submit(h, "", "alice", false); r.status != http.StatusBadRequest || problemCode(t, r) != idemhttp.CodeTokenMissing {
		t.Fatalf("no token = %d, want 400", r.status)
	}
	if orders.Load() != 2 {
		t.Fatalf("%d orders placed, want 2", orders.Load())
	}
}

// submit posts user's checkout to h with the submit token tok, in a form
// field if form and otherwise in the Submit-Token header.
func submit(h http.Handler, tok, user string, form bool) resp {
	var req *http.Request
	if form {
		req = httptest.NewRequest("POST", "/checkout", strings.NewReader(url.Values{"submit_token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest("POST", "/checkout", nil)
		if tok != "" {
			req.Header.Set("Submit-Token", tok)
		}
	}
	req.Header.Set("X-User", user)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return resp{rec.Code, rec.Header(), rec.Body.String()}
}

func TestRequireTokenSafeMethodsAndStoreDown(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs.Add(1) })
	h := idemhttp.RequireToken(downTokens{})(ok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/checkout", nil))
	if rec.Code != 200 || runs.Load() != 1 {
		t.Fatalf("GET = %d", rec.Code)
	}
	req := httptest.NewRequest("POST", "/checkout", nil)
	req.Header.Set("Submit-Token", idem.NewToken())
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || runs.Load() != 1 {
		t.Fatalf("store down = %d after %d runs, want 503 and no run", rec.Code, runs.Load())
	}
}

// downTokens is a token store that cannot be reached. A stub, because what is
// tested is the middleware's answer to an error, not any store's behaviour
// (the real stores' failures are covered in TestStoreDownFailsClosed).
type downTokens struct{}

func (downTokens) PutToken(context.Context, string, string, time.Duration) error {
	return errors.New("connection refused")
}
func (downTokens) ConsumeToken(context.Context, string, string) error {
	return errors.New("connection refused")
}
