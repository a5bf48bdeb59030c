package idemhttp_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

var keySeeds = []string{
	"", " ", "a", "abc-123", `"abc-123"`, `""`, `"a\"b"`, `"a\\b"`, `"a\b"`, `"abc`, `abc"`,
	`"abc";p=1`, "a,b", "a;b", "a b", "\ta\t", ` "x" `, "8e03978e-40d5-43e8-bc93-6894a57f9324",
	"ключ", "\x00", "a\x7f", `"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 256),
	`"\"`, `"\\"`, "{tag}", "a:b/c=d+e@f", `"  spaced  key  "`,
}

// sfQuote writes k as an RFC 8941 sf-string.
func sfQuote(k string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
}

func FuzzParseKey(f *testing.F) {
	for _, s := range keySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		k, err := idemhttp.ParseKey(v)
		if err != nil {
			if !errors.Is(err, idemhttp.ErrKeyMalformed) && !errors.Is(err, idemhttp.ErrKeyTooLong) {
				t.Fatalf("ParseKey(%q) = %v, not one of the key errors", v, err)
			}
			if k != "" {
				t.Fatalf("ParseKey(%q) returned %q with an error", v, k)
			}
			return
		}
		if k == "" || len(k) > idemhttp.MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %q: length %d outside [1, 255]", v, k, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q holds byte %q", v, k, k[i])
			}
		}
		// The quoted form of a key is the same key.
		if k2, err := idemhttp.ParseKey(sfQuote(k)); err != nil || k2 != k {
			t.Fatalf("ParseKey(sfQuote(%q)) = %q, %v", k, k2, err)
		}
		// A bare key is itself.
		if tv := strings.Trim(v, " \t"); !strings.HasPrefix(tv, `"`) && k != tv {
			t.Fatalf("bare ParseKey(%q) = %q", v, k)
		}
	})
}

// FuzzMiddlewareHeaders sends two requests with arbitrary key and
// Authorization values and checks the middleware's promises: no panic, bad
// keys get 400 and never reach the handler, a good key runs the handler once
// and replays it, and every error is valid problem+json.
func FuzzMiddlewareHeaders(f *testing.F) {
	for i, s := range keySeeds {
		f.Add(s, keySeeds[(i+1)%len(keySeeds)], "Bearer a", "Bearer a", []byte(`{"amount":100}`))
	}
	f.Add("k", "k", "Bearer a", "Bearer b", []byte("{}"))
	f.Add("k", `"k"`, "", "", []byte{})
	f.Fuzz(func(t *testing.T, key1, key2, auth1, auth2 string, body []byte) {
		var calls atomic.Int32
		h := idemhttp.Middleware(memstore.New())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			b, _ := io.ReadAll(r.Body)
			if string(b) != string(body) {
				t.Errorf("handler saw body %q, want %q", b, body)
			}
			w.Header().Set("Set-Cookie", "s=1")
			w.WriteHeader(201)
			_, _ = w.Write([]byte{byte(n)})
		}))
		r1 := sendFuzzed(h, key1, auth1, body)
		k1, ok1 := checkFuzzedKey(t, key1, r1)
		r2 := sendFuzzed(h, key2, auth2, body)
		k2, ok2 := checkFuzzedKey(t, key2, r2)
		want := int32(0)
		if ok1 {
			want++
		}
		same := ok1 && ok2 && k1 == k2 && auth1 == auth2
		if ok2 && !same {
			want++
		}
		if calls.Load() != want {
			t.Fatalf("handler ran %d times, want %d (keys %q %q, auth %q %q)", calls.Load(), want, key1, key2, auth1, auth2)
		}
		if same {
			if r2.Header().Get("Idempotent-Replayed") != "true" || r2.Body.String() != r1.Body.String() {
				t.Fatalf("same key and principal not replayed: %q vs %q", r2.Body.String(), r1.Body.String())
			}
			if r2.Header().Get("Set-Cookie") != "" {
				t.Fatal("Set-Cookie replayed")
			}
		} else if ok2 && r2.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("different key or principal got a replay (keys %q %q, auth %q %q)", key1, key2, auth1, auth2)
		}
	})
}

// sendFuzzed posts body to h with the key and, unless empty, the
// Authorization value, both as given.
func sendFuzzed(h http.Handler, key, auth string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/pay", strings.NewReader(string(body)))
	req.Header["Idempotency-Key"] = []string{key}
	if auth != "" {
		req.Header["Authorization"] = []string{auth}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// checkFuzzedKey checks the answer to a request with key: 400 with a
// problem+json body for a bad key, 201 for a good one, whose parsed form
// it returns with true.
func checkFuzzedKey(t *testing.T, key string, rec *httptest.ResponseRecorder) (string, bool) {
	t.Helper()
	k, err := idemhttp.ParseKey(key)
	if err != nil {
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("bad key %q answered %d", key, rec.Code)
		}
		var p map[string]any
		if rec.Header().Get("Content-Type") != "application/problem+json" || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
			t.Fatalf("400 body is not problem+json: %q", rec.Body.String())
		}
		return "", false
	}
	if rec.Code != 201 {
		t.Fatalf("good key %q answered %d: %s", key, rec.Code, rec.Body.String())
	}
	return k, true
}
