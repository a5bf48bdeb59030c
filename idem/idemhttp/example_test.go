package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
)

// The same payment arrives three times; the card is charged once and every
// copy gets the first answer, marked as a replay.
func ExampleMiddleware() {
	store := memstore.New() // redisstore, sqlstore or layered in production
	charges := 0
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":"ch_%d"}`, charges)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /pay", idemhttp.Middleware(store)(pay))

	for range 3 {
		req := httptest.NewRequest("POST", "/pay", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		req.Header.Set("Authorization", "Bearer user-42")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Body.String(), "replayed:", rec.Header().Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201 {"charge":"ch_1"} replayed: false
	// 201 {"charge":"ch_1"} replayed: true
	// 201 {"charge":"ch_1"} replayed: true
	// charges: 1
}

// The key can come from the body, like a Java service's @Idempotent(key =
// "#req.requestId").
func ExampleWithBodyKey() {
	charges := 0
	h := idemhttp.Middleware(memstore.New(), idemhttp.WithBodyKey("requestId"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			charges++
			io.WriteString(w, "paid")
		}))
	for _, body := range []string{`{"requestId":"R-1","amount":100}`, `{"requestId":"R-1","amount":100}`, `{"amount":100}`} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/pay", strings.NewReader(body)))
		fmt.Println(rec.Code)
	}
	fmt.Println("charges:", charges)
	// Output:
	// 200
	// 200
	// 400
	// charges: 1
}

// A form's one-time token: the first submit places the order, the
// double-clicked second one is refused with 409.
func ExampleRequireToken() {
	ctx := context.Background()
	store := memstore.New()
	submit := idemhttp.RequireToken(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))

	tok, _ := idem.IssueToken(ctx, store, "", 10*time.Minute) // when the form is shown
	for range 2 {
		req := httptest.NewRequest("POST", "/checkout", nil)
		req.Header.Set("Submit-Token", tok)
		rec := httptest.NewRecorder()
		submit.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// 201
	// 409
}
