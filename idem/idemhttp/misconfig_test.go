package idemhttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// panicOf runs f and returns what it panicked with, as text ("" for none).
func panicOf(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	f()
	return ""
}

// A middleware with a bad option never serves a request: it is refused where
// it is built, naming the option and the value, instead of answering every
// payment 500 with nothing in the log.
func TestBadOptionRefusedAtConstruction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []idemhttp.Option
		want []string // in the message
	}{
		{"negative in-progress", []idemhttp.Option{idemhttp.WithInProgress(-time.Second)}, []string{"idemhttp.WithInProgress(-1s)"}},
		{"zero in-progress", []idemhttp.Option{idemhttp.WithInProgress(0)}, []string{"idemhttp.WithInProgress(0s)"}},
		{"retention over a year", []idemhttp.Option{idemhttp.WithRetention(400 * 24 * time.Hour)}, []string{"idemhttp.WithRetention(9600h0m0s)"}},
		{"negative wait", []idemhttp.Option{idemhttp.WithWait(-time.Millisecond)}, []string{"idemhttp.WithWait(-1ms)"}},
		{"negative request cap", []idemhttp.Option{idemhttp.WithMaxRequestBody(-1)}, []string{"idemhttp.WithMaxRequestBody(-1)"}},
		{"negative response cap", []idemhttp.Option{idemhttp.WithMaxResponseBody(-5)}, []string{"idemhttp.WithMaxResponseBody(-5)"}},
		{"nil key function", []idemhttp.Option{idemhttp.WithKeyFunc(nil)}, []string{"idemhttp.WithKeyFunc(nil)"}},
		{"nil principal", []idemhttp.Option{idemhttp.WithPrincipal(nil)}, []string{"idemhttp.WithPrincipal(nil)"}},
		{"nil route", []idemhttp.Option{idemhttp.WithRoute(nil)}, []string{"idemhttp.WithRoute(nil)"}},
		{"nil fingerprint", []idemhttp.Option{idemhttp.WithFingerprint(nil)}, []string{"idemhttp.WithFingerprint(nil)"}},
		{"nil status function", []idemhttp.Option{idemhttp.WithStoreStatus(nil)}, []string{"idemhttp.WithStoreStatus(nil)"}},
		{"empty header", []idemhttp.Option{idemhttp.WithHeader("")}, []string{`idemhttp.WithHeader("")`}},
		{"header with a space", []idemhttp.Option{idemhttp.WithHeader("Idempotency Key")}, []string{`idemhttp.WithHeader("Idempotency Key")`}},
		{"empty body member", []idemhttp.Option{idemhttp.WithBodyKey("")}, []string{`idemhttp.WithBodyKey("")`}},
		{"no methods", []idemhttp.Option{idemhttp.WithMethods()}, []string{"idemhttp.WithMethods()"}},
		{"lower-case method", []idemhttp.Option{idemhttp.WithMethods("POST", "put")}, []string{`idemhttp.WithMethods("POST", "put")`, `"put"`}},
		{"two bad options", []idemhttp.Option{idemhttp.WithInProgress(-time.Second), idemhttp.WithKeyFunc(nil)},
			[]string{"idemhttp.WithInProgress(-1s)", "idemhttp.WithKeyFunc(nil)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := idemhttp.NewMiddleware(memstore.New(), tc.opts...)
			if !errors.Is(err, idem.ErrInvalid) {
				t.Fatalf("NewMiddleware = %v, want ErrInvalid", err)
			}
			served := false
			msg := panicOf(func() {
				h := idemhttp.Middleware(memstore.New(), tc.opts...)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				do(t, h, "POST", "k", "", "{}")
				served = true
			})
			if served {
				t.Fatal("Middleware served a request with a bad option")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) || !strings.Contains(msg, w) {
					t.Fatalf("NewMiddleware error %q and Middleware panic %q, want both to name %s", err, msg, w)
				}
			}
			if !strings.HasPrefix(msg, "idemhttp.Middleware: ") {
				t.Fatalf("panic %q does not say where", msg)
			}
		})
	}
}

func TestNilStoreRefusedAtConstruction(t *testing.T) {
	t.Parallel()
	if _, err := idemhttp.NewMiddleware(nil); !errors.Is(err, idem.ErrInvalid) || !strings.Contains(err.Error(), "nil store") {
		t.Fatalf("NewMiddleware(nil) = %v, want ErrInvalid naming the nil store", err)
	}
	if msg := panicOf(func() { idemhttp.Middleware(nil) }); !strings.Contains(msg, "idemhttp.Middleware: ") || !strings.Contains(msg, "nil store") {
		t.Fatalf("Middleware(nil) panicked with %q, want a message naming the nil store", msg)
	}
}

// Good options, including the ones that look like edge cases, build.
func TestGoodOptionsBuild(t *testing.T) {
	t.Parallel()
	if _, err := idemhttp.NewMiddleware(memstore.New(),
		idemhttp.WithMethods("POST", "PUT", "DELETE"), idemhttp.WithHeader("X-Request-Key"),
		idemhttp.WithMaxRequestBody(0), idemhttp.WithWait(0), idemhttp.WithInProgress(time.Millisecond),
		idemhttp.WithErrorHandler(nil), idemhttp.WithObserver(nil), idemhttp.WithLogger(nil), nil,
	); err != nil {
		t.Fatal(err)
	}
}

// A submit-token guard with a bad option is refused where it is built, so a
// form is never refused on every submit, nor accepted with a binding the
// program meant to check and silently does not.
func TestRequireTokenRefusedAtConstruction(t *testing.T) {
	t.Parallel()
	ts := memstore.New()
	for _, tc := range []struct {
		name  string
		build func()
		want  string
	}{
		{"nil store", func() { idemhttp.RequireToken(nil) }, "nil token store"},
		{"nil bind", func() { idemhttp.RequireToken(ts, idemhttp.WithTokenBind(nil)) }, "idemhttp.WithTokenBind(nil)"},
		{"bad header", func() { idemhttp.RequireToken(ts, idemhttp.WithTokenHeader("Submit Token")) }, `idemhttp.WithTokenHeader("Submit Token")`},
		{"nowhere to read", func() { idemhttp.RequireToken(ts, idemhttp.WithTokenHeader(""), idemhttp.WithTokenField("")) },
			`idemhttp.WithTokenHeader("") and idemhttp.WithTokenField("")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msg := panicOf(tc.build)
			if !strings.HasPrefix(msg, "idemhttp.RequireToken: ") || !strings.Contains(msg, tc.want) {
				t.Fatalf("RequireToken panicked with %q, want it to name %s", msg, tc.want)
			}
		})
	}
	// Reading only the form, or only the header, is fine.
	if msg := panicOf(func() { idemhttp.RequireToken(ts, idemhttp.WithTokenHeader("")) }); msg != "" {
		t.Fatal(msg)
	}
	if msg := panicOf(func() { idemhttp.RequireToken(ts, idemhttp.WithTokenField("")) }); msg != "" {
		t.Fatal(msg)
	}
}
