package idemhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/internal/teststores"
	"github.com/latchkey-go/latchkey/idem/redisstore"
)

const (
	benchBody     = `{"amount":100,"currency":"EUR"}`
	benchResponse = `{"charge":"ch_1","amount":100}`
)

var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(benchResponse))
})

// The benchmarks run from 64 goroutines against a private redis-server and
// report what a request costs in CPU (see teststores.BenchParallel).

// BenchmarkGuardMiddleware is the hand-written guard as middleware, the
// baseline: SET NX EX on the scoped key, 409 for a duplicate, no replay.
func BenchmarkGuardMiddleware(b *testing.B) {
	c := teststores.BenchRedis(b)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, err := c.SetNX(r.Context(), "guard:"+r.Header.Get("Authorization")+":"+r.Header.Get("Idempotency-Key"), "1", 10*time.Minute).Result()
		if err != nil || !ok {
			http.Error(w, "duplicate", http.StatusConflict)
			return
		}
		benchHandler.ServeHTTP(w, r)
	})
	var n atomic.Int64
	benchServe(b, c, h, func() string { return "first-" + strconv.FormatInt(n.Add(1), 10) })
}

// BenchmarkMiddlewareFirstRequest is a payment request with a new key each
// time through the middleware on Redis: claim, handler, record.
func BenchmarkMiddlewareFirstRequest(b *testing.B) {
	c := teststores.BenchRedis(b)
	h := benchMiddleware(c)
	var n atomic.Int64
	benchServe(b, c, h, func() string { return "first-" + strconv.FormatInt(n.Add(1), 10) })
}

// BenchmarkMiddlewareReplay is the same request with one key, replayed.
func BenchmarkMiddlewareReplay(b *testing.B) {
	c := teststores.BenchRedis(b)
	h := benchMiddleware(c)
	serveBench(context.Background(), h, "replay")
	benchServe(b, c, h, func() string { return "replay" })
}

func benchMiddleware(c *redis.Client) http.Handler {
	return idemhttp.Middleware(redisstore.New(c), idemhttp.WithRetention(10*time.Minute))(benchHandler)
}

func benchServe(b *testing.B, c *redis.Client, h http.Handler, key func() string) {
	teststores.BenchParallel(b, c, func(ctx context.Context) {
		if code, body := serveBench(ctx, h, key()); code != http.StatusCreated || body != benchResponse {
			b.Errorf("status %d body %q", code, body)
		}
	})
}

// serveBench makes one request as bench/ does: in-process, through
// httptest.
func serveBench(ctx context.Context, h http.Handler, key string) (int, string) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/payments", strings.NewReader(benchBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer user-42")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}
