package idemhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/internal/testsvc"
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
// report, besides ns/op, what a request costs in CPU: cpu-us/op is this
// process's user and system time, srv-us/op the server's.

// BenchmarkGuardMiddleware is the hand-written guard as middleware, the
// baseline: SET NX EX on the scoped key, 409 for a duplicate, no replay.
func BenchmarkGuardMiddleware(b *testing.B) {
	c := benchRedis(b)
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
	c := benchRedis(b)
	h := benchMiddleware(c)
	var n atomic.Int64
	benchServe(b, c, h, func() string { return "first-" + strconv.FormatInt(n.Add(1), 10) })
}

// BenchmarkMiddlewareReplay is the same request with one key, replayed.
func BenchmarkMiddlewareReplay(b *testing.B) {
	c := benchRedis(b)
	h := benchMiddleware(c)
	serveBench(context.Background(), h, "replay")
	benchServe(b, c, h, func() string { return "replay" })
}

func benchRedis(b *testing.B) *redis.Client {
	srv := testsvc.StartRedis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func benchMiddleware(c *redis.Client) http.Handler {
	return idemhttp.Middleware(redisstore.New(c), idemhttp.WithRetention(10*time.Minute))(benchHandler)
}

func benchServe(b *testing.B, c *redis.Client, h http.Handler, key func() string) {
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	srv0 := serverCPU(b, c)
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if code, body := serveBench(ctx, h, key()); code != http.StatusCreated || body != benchResponse {
				b.Errorf("status %d body %q", code, body)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(serverCPU(b, c)-srv0)/float64(time.Microsecond)/float64(b.N), "srv-us/op")
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

// processCPU is this process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the Redis server's user and system time so far (INFO cpu).
func serverCPU(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}
