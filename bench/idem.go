package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/redisstore"
)

// The idempotency benchmark puts latchkey's claim -> run -> record -> replay
// cycle on Redis beside the usual hand-written guard: an aspect that does
// SET NX EX on the request's key before the handler and rejects a duplicate.
// The guard answers a duplicate with an error and nothing else; latchkey
// replays the first answer in full. Both run on one go-redis client (default
// options) per implementation, on the same Redis, in the same run.

// guardTTL is the guard's SET NX EX expiry and latchkey's retention.
const guardTTL = 10 * time.Minute

// errDuplicate is the guard's answer to a duplicate: such guards throw
// DuplicateRequestException, which a controller advice maps to 409.
var errDuplicate = errors.New("duplicate request")

// payment is what the guarded operation returns, and latchkey replays.
type payment struct {
	Charge string `json:"charge"`
	Amount int    `json:"amount"`
}

func pay(context.Context) (payment, error) { return payment{Charge: "ch_1", Amount: 100}, nil }

const (
	payBody     = `{"amount":100,"currency":"EUR"}`
	payResponse = `{"charge":"ch_1","amount":100}`
)

// payHandler is the guarded HTTP handler.
var payHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(payResponse))
})

// guardDo is the hand-written guard around a function: SET NX EX, then the
// operation, or errDuplicate.
func guardDo(ctx context.Context, c *redis.Client, key string, fn func(context.Context) (payment, error)) (payment, error) {
	ok, err := c.SetNX(ctx, "guard:"+key, "1", guardTTL).Result()
	if err != nil {
		return payment{}, err
	}
	if !ok {
		return payment{}, errDuplicate
	}
	return fn(ctx)
}

// guardMiddleware is the same guard as an HTTP middleware: the key from the
// Idempotency-Key header, scoped by the Authorization header, 409 for a
// duplicate.
func guardMiddleware(c *redis.Client) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := r.Header.Get("Idempotency-Key")
			if key == "" {
				http.Error(w, "missing Idempotency-Key", http.StatusBadRequest)
				return
			}
			ok, err := c.SetNX(r.Context(), "guard:"+r.Header.Get("Authorization")+":"+key, "1", guardTTL).Result()
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			if !ok {
				http.Error(w, errDuplicate.Error(), http.StatusConflict)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// An idemImpl is one side of the comparison: call handles one request with
// key and reports whether the answer was the expected one (the payment, a
// replay of it, or the guard's rejection of a duplicate).
type idemImpl struct {
	name string
	// http: the guard or latchkey as middleware, called in-process through
	// httptest; otherwise around a function.
	http bool
	// replays: duplicates get the first answer, not a rejection.
	replays bool
	// open returns the request function; prefix is given to stores (keys
	// passed to the function already start with it).
	open func(c *redis.Client, prefix string) func(ctx context.Context, key string, dup bool) error
}

func idemImplementations(storeOpts ...redisstore.Option) []idemImpl {
	return []idemImpl{
		{"hand-written guard", false, false, func(c *redis.Client, prefix string) func(context.Context, string, bool) error {
			return func(ctx context.Context, key string, dup bool) error {
				p, err := guardDo(ctx, c, key, pay)
				switch {
				case dup && errors.Is(err, errDuplicate):
					return nil
				case err != nil:
					return err
				case dup || p.Charge != "ch_1":
					return fmt.Errorf("guard: unexpected %v for dup=%v", p, dup)
				}
				return nil
			}
		}},
		{"idem.Do", false, true, func(c *redis.Client, prefix string) func(context.Context, string, bool) error {
			s := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, storeOpts...)...)
			return func(ctx context.Context, key string, dup bool) error {
				p, err := idem.Do(ctx, s, key, pay, idem.WithRetention(guardTTL))
				if err != nil {
					return err
				}
				if p.Charge != "ch_1" {
					return fmt.Errorf("idem.Do: unexpected %v", p)
				}
				return nil
			}
		}},
		{"guard middleware", true, false, func(c *redis.Client, prefix string) func(context.Context, string, bool) error {
			h := guardMiddleware(c)(payHandler)
			return func(ctx context.Context, key string, dup bool) error {
				code, _ := serve(ctx, h, key)
				if want := map[bool]int{false: http.StatusCreated, true: http.StatusConflict}[dup]; code != want {
					return fmt.Errorf("guard middleware: status %d, want %d", code, want)
				}
				return nil
			}
		}},
		{"idemhttp", true, true, func(c *redis.Client, prefix string) func(context.Context, string, bool) error {
			s := redisstore.New(c, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, storeOpts...)...)
			h := idemhttp.Middleware(s, idemhttp.WithRetention(guardTTL))(payHandler)
			return func(ctx context.Context, key string, dup bool) error {
				code, body := serve(ctx, h, key)
				if code != http.StatusCreated || body != payResponse {
					return fmt.Errorf("idemhttp: status %d body %q", code, body)
				}
				return nil
			}
		}},
	}
}

// serve makes one payment request to h in-process.
func serve(ctx context.Context, h http.Handler, key string) (int, string) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/payments", strings.NewReader(payBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer user-42")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// roundTrips counts a client's round trips: one per command sent alone, one
// per pipeline.
type roundTrips struct{ n atomic.Int64 }

func (rt *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (rt *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		rt.n.Add(1)
		return next(ctx, cmd)
	}
}

func (rt *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		rt.n.Add(1)
		return next(ctx, cmds)
	}
}

// idemWorkload is one row's traffic: each key is sent copies times in a row
// by one client, after pre copies were sent before the clock started.
type idemWorkload struct {
	name   string
	pre    int // copies of each key sent before measuring (1: measure replays only)
	copies int // copies of each key measured
}

var idemWorkloads = []idemWorkload{
	{"first requests (new key each)", 0, 1},
	{"duplicates (guard rejects, latchkey replays)", 1, 1},
	{"3 copies per key (1 first + 2 duplicates)", 0, 3},
}

// idemResult is one implementation's medians, per workload.
type idemResult struct {
	perSec      []float64 // requests/s at g clients
	ratio       []float64 // to the guard of the same kind, same run
	rtConc      []float64 // round trips per request at g clients
	rtFirst     float64   // round trips of one first request, one client
	rtDuplicate float64   // round trips of one duplicate, one client
}

// idemThroughput runs g clients for d, each sending its own keys, and returns
// requests/s and round trips per request. For a workload with pre copies, keys
// are prepared before the clock starts (the guard's SET NX, latchkey's
// recorded result).
func idemThroughput(ctx context.Context, call func(context.Context, string, bool) error, rt *roundTrips, prefix string, w idemWorkload, g int, d time.Duration) (float64, float64) {
	// Duplicates are sent on a pool of prepared keys per client, cycled.
	const prepared = 200
	if w.pre > 0 {
		var wg sync.WaitGroup
		for i := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range prepared {
					if err := call(ctx, fmt.Sprintf("%sc%d:%d", prefix, i, k), false); err != nil {
						fmt.Fprintln(os.Stderr, "prepare:", err)
					}
				}
			}()
		}
		wg.Wait()
	}
	var n, failed atomic.Int64
	var wg sync.WaitGroup
	rt0 := rt.n.Load()
	stop := time.Now().Add(d)
	start := time.Now()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; time.Now().Before(stop); k++ {
				key := fmt.Sprintf("%sc%d:%d", prefix, i, k)
				if w.pre > 0 {
					key = fmt.Sprintf("%sc%d:%d", prefix, i, k%prepared)
				}
				for c := range w.copies {
					if err := call(ctx, key, w.pre+c > 0); err != nil {
						if failed.Add(1) <= 3 {
							fmt.Fprintln(os.Stderr, err)
						}
						continue
					}
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	return float64(n.Load()) / elapsed.Seconds(), float64(rt.n.Load()-rt0) / float64(max(n.Load(), 1))
}

// idemSequentialRoundTrips sends n first requests and then n duplicates from
// one client and returns round trips per request of each.
func idemSequentialRoundTrips(ctx context.Context, call func(context.Context, string, bool) error, rt *roundTrips, prefix string, n int) (first, dup float64) {
	// Warm up: the scripts are loaded (EVALSHA, then EVAL once) before counting.
	_ = call(ctx, prefix+"warm", false)
	rt0 := rt.n.Load()
	for i := range n {
		if err := call(ctx, fmt.Sprintf("%s%d", prefix, i), false); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	rt1 := rt.n.Load()
	for i := range n {
		if err := call(ctx, fmt.Sprintf("%s%d", prefix, i), true); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	rt2 := rt.n.Load()
	return float64(rt1-rt0) / float64(n), float64(rt2-rt1) / float64(n)
}

// idemBench measures every implementation and prints the idempotency table.
// Within a run, the implementations take turns on each workload, so that a
// drift in the machine's load touches them alike; ratios are taken within a
// run and their median reported.
func idemBench(ctx context.Context, addr, prefix string, runs, g int, d time.Duration, impls []idemImpl) {
	type opened struct {
		call func(context.Context, string, bool) error
		rt   *roundTrips
		c    *redis.Client
		p    string
	}
	ops := make([]opened, len(impls))
	res := make([]idemResult, len(impls))
	for i, im := range impls {
		rt := &roundTrips{}
		c := newGoRedis(addr)
		c.AddHook(rt)
		p := fmt.Sprintf("%sidem:%s:", prefix, im.name)
		ops[i] = opened{im.open(c, p), rt, c, p}
		res[i].rtFirst, res[i].rtDuplicate = idemSequentialRoundTrips(ctx, ops[i].call, rt, p+"seq:", 100)
	}
	guard := idemGuards(impls)
	for wi, w := range idemWorkloads {
		fmt.Fprintf(os.Stderr, "%s ...\n", w.name)
		perSec := make([][]float64, len(impls))
		ratio := make([][]float64, len(impls))
		rts := make([][]float64, len(impls))
		for run := range runs {
			v := make([]float64, len(impls))
			for i, op := range ops {
				var perReq float64
				v[i], perReq = idemThroughput(ctx, op.call, op.rt, fmt.Sprintf("%sw%d:r%d:", op.p, wi, run), w, g, d)
				perSec[i] = append(perSec[i], v[i])
				rts[i] = append(rts[i], perReq)
			}
			for i := range impls {
				ratio[i] = append(ratio[i], v[i]/v[guard[i]])
			}
		}
		for i := range impls {
			res[i].perSec = append(res[i].perSec, medianOf(perSec[i]))
			res[i].ratio = append(res[i].ratio, medianOf(ratio[i]))
			res[i].rtConc = append(res[i].rtConc, medianOf(rts[i]))
		}
	}
	for _, op := range ops {
		cleanup(ctx, op.c, op.p)
		_ = op.c.Close()
	}
	printIdemTable(impls, res, g, runs, d)
}

// idemGuards maps each implementation to the guard of its kind (function or
// middleware): the last one listed before it that does not replay.
func idemGuards(impls []idemImpl) []int {
	out := make([]int, len(impls))
	for i := range impls {
		out[i] = i
		for j := i; j >= 0; j-- {
			if !impls[j].replays && impls[j].http == impls[i].http {
				out[i] = j
				break
			}
		}
	}
	return out
}

func medianOf(xs []float64) float64 {
	return median(len(xs), func(i int) float64 { return xs[i] })
}

// cleanup deletes every key under prefix.
func cleanup(ctx context.Context, c *redis.Client, prefix string) {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, "*"+prefix+"*", 5000).Result()
		if err != nil {
			return
		}
		if len(keys) > 0 {
			c.Unlink(ctx, keys...)
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// printIdemTable prints one column per implementation; latchkey's columns
// carry their ratio to the guard of the same kind (function or middleware).
func printIdemTable(impls []idemImpl, res []idemResult, g, runs int, d time.Duration) {
	guard := idemGuards(impls)
	fmt.Printf("\nIdempotency, %d clients, medians of %d runs of %v (requests/s; ratio to the guard of the same kind, same run):\n", g, runs, d)
	fmt.Printf("\n| | %s |\n|---|", strings.Join(idemNames(impls), " | "))
	for range impls {
		fmt.Print("---|")
	}
	fmt.Println()
	for wi, w := range idemWorkloads {
		fmt.Printf("| %s |", w.name)
		for i := range impls {
			if guard[i] != i {
				fmt.Printf(" %s (%.2fx) |", si(res[i].perSec[wi]), res[i].ratio[wi])
			} else {
				fmt.Printf(" %s |", si(res[i].perSec[wi]))
			}
		}
		fmt.Println()
	}
	fmt.Print("| round trips, first request (1 client) |")
	for i := range impls {
		fmt.Printf(" %.2f |", res[i].rtFirst)
	}
	fmt.Print("\n| round trips, duplicate (1 client) |")
	for i := range impls {
		fmt.Printf(" %.2f |", res[i].rtDuplicate)
	}
	fmt.Println()
	for wi, w := range idemWorkloads {
		fmt.Printf("| round trips per request at %d clients, %s |", g, w.name)
		for i := range impls {
			fmt.Printf(" %.2f |", res[i].rtConc[wi])
		}
		fmt.Println()
	}
}

func idemNames(impls []idemImpl) []string {
	var out []string
	for _, im := range impls {
		out = append(out, im.name)
	}
	return out
}
