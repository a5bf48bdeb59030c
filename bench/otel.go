package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/latchkeyotel"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
)

// otelG is the goroutine count of the OpenTelemetry cost table.
const otelG = 16

// discardEnv, set in the environment of this program, makes it a
// discarding OTLP endpoint instead (see discardingCollector).
const discardEnv = "LATCHKEY_BENCH_DISCARD_OTLP"

func init() {
	if os.Getenv(discardEnv) != "" {
		serveDiscard()
	}
}

// serveDiscard is the discarding endpoint's process: it listens on a free
// loopback port, prints the address, reads each export whole and answers
// 200 with an empty body, until its parent ends it.
func serveDiscard() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	os.Exit(0)
}

// discardingCollector starts this program again as an OTLP/HTTP endpoint
// that discards what it gets, so the SDK does its real work (batching,
// protobuf encoding, an HTTP round trip on loopback) while the receiving
// end, which a real deployment runs elsewhere, stays out of this process's
// CPU time.
func discardingCollector() (endpoint string, stop func(), err error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), discardEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("discarding OTLP endpoint: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

// otelTelemetry returns a Telemetry on a real SDK: a batching span
// processor exporting over OTLP/HTTP to endpoint the sample fraction of the
// traces (the SDK's ParentBased(TraceIDRatioBased) sampler), and a meter provider
// with a manual reader: the aggregation happens on every measurement, as
// with any reader; only the collection, every few seconds in a real
// program, is left out.
func otelTelemetry(ctx context.Context, endpoint string, sample float64) (*latchkeyotel.Telemetry, func(), error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(sample))))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tel, err := latchkeyotel.New(latchkeyotel.WithTracerProvider(tp), latchkeyotel.WithMeterProvider(mp))
	if err != nil {
		return nil, nil, err
	}
	return tel, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
		_ = mp.Shutdown(sctx)
	}, nil
}

// otelSamples are the sampling fractions the cost table shows: every trace
// (the worst case), and one in ten, as a busy service would sample.
var otelSamples = []float64{1, 0.1}

// otelBench measures what OpenTelemetry costs: a lock pair (redislock) and
// an idempotent request (idemhttp on redisstore, first requests), each at
// 16 goroutines, without and with latchkeyotel's observers on a real SDK
// exporting to a discarding endpoint in a child process, at each of
// otelSamples. Within a run the two take turns (without, with,
// with, without), and the ratio of each run is taken; the median is
// printed.
func otelBench(ctx context.Context, addr, prefix string, runs int, d time.Duration) error {
	endpoint, stop, err := discardingCollector()
	if err != nil {
		return err
	}
	defer stop()
	c := newGoRedis(addr)
	defer c.Close()
	defer cleanup(ctx, c, prefix+"otel:")
	fmt.Printf("\n## OpenTelemetry cost (%d goroutines, real SDK: batching OTLP/HTTP exporter to a discarding endpoint in another process; median of %d runs, each without/with/with/without for %v)\n\n", otelG, runs, d)
	fmt.Println("| operation | traces sampled | without OTel /s | with OTel /s | rate with / without | CPU per op with / without |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, sample := range otelSamples {
		tel, shutdown, err := otelTelemetry(ctx, endpoint, sample)
		if err != nil {
			return err
		}
		lock, idem, err := otelCost(ctx, c, tel, prefix, runs, d)
		shutdown()
		if err != nil {
			return err
		}
		fmt.Printf("| lock pair (redislock) | %.0f%% | %.0f | %.0f | %.3f | %.3f |\n", 100*sample, lock.plain, lock.traced, lock.ratio, lock.cpu)
		fmt.Printf("| idempotent request (idemhttp, first requests) | %.0f%% | %.0f | %.0f | %.3f | %.3f |\n", 100*sample, idem.plain, idem.traced, idem.ratio, idem.cpu)
	}
	return nil
}

// otelResult is one operation's medians: per second without and with, the
// ratio of the rates (with / without), and the ratio of this process's CPU
// time per operation (with / without).
type otelResult struct{ plain, traced, ratio, cpu float64 }

// otelCost measures the lock pair and the idempotent request without and
// with tel.
func otelCost(ctx context.Context, c *redis.Client, tel *latchkeyotel.Telemetry, prefix string, runs int, d time.Duration) (lockRes, idemRes otelResult, err error) {
	plain, err := redislock.New(c)
	if err != nil {
		return lockRes, idemRes, err
	}
	defer plain.Close()
	traced, err := redislock.New(c)
	if err != nil {
		return lockRes, idemRes, err
	}
	defer traced.Close()
	traced.SetObserver(tel.LockObserver("redis"))
	lockerOf := func(l *redislock.Locker) locker {
		return locker{lock: func(ctx context.Context, key string) (func(context.Context) error, error) {
			lease, err := l.Acquire(ctx, key, lock.WithTTL(ttl))
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		}, stalls: new(atomic.Int64)}
	}

	store := redisstore.New(c, redisstore.WithPrefix(prefix+"otel:"))
	plainH := idemhttp.Middleware(store, idemhttp.WithRetention(guardTTL))(payHandler)
	tracedH := idemhttp.Middleware(store, idemhttp.WithRetention(guardTTL), idemhttp.WithObserver(tel.HTTPObserver("pay")))(payHandler)
	request := func(h http.Handler) func(context.Context, string, bool) error {
		return func(ctx context.Context, key string, _ bool) error {
			if code, _ := serve(ctx, h, key); code != http.StatusCreated {
				return fmt.Errorf("idemhttp: status %d", code)
			}
			return nil
		}
	}
	first := idemWorkloads[0]
	// Each run measures without, with, with, without (ABBA), d each, so a
	// drift in the machine's load during the run touches both alike; the
	// run's ratio is its with-sum over its without-sum. Beside the rate it
	// takes this process's CPU time per operation (getrusage), which other
	// processes on the machine disturb much less than the rate.
	var lockRatios, idemRatios, lockCPU, idemCPU []float64
	var lockPlain, lockTraced, idemPlain, idemTraced []float64
	tag := time.Now().UnixNano()
	for run := range runs {
		var lp, lt, ip, it float64
		var lcp, lct, icp, ict float64 // CPU seconds per operation, summed
		for step, with := range []bool{false, true, true, false} {
			l, h := lockerOf(plain), plainH
			if with {
				l, h = lockerOf(traced), tracedH
			}
			var pl, pi, cl, ci float64
			cl = cpuPerOp(func() float64 {
				pl = uncontended(ctx, l, fmt.Sprintf("%sotel:l%d:%d:%d:", prefix, tag, run, step), otelG, d)
				return pl
			})
			ci = cpuPerOp(func() float64 {
				pi, _ = idemThroughput(ctx, request(h), &roundTrips{}, fmt.Sprintf("%sotel:i%d:%d:%d:", prefix, tag, run, step), first, otelG, d)
				return pi
			})
			if with {
				lt, it, lct, ict = lt+pl/2, it+pi/2, lct+cl, ict+ci
			} else {
				lp, ip, lcp, icp = lp+pl/2, ip+pi/2, lcp+cl, icp+ci
			}
		}
		lockPlain, lockTraced, lockRatios = append(lockPlain, lp), append(lockTraced, lt), append(lockRatios, lt/lp)
		idemPlain, idemTraced, idemRatios = append(idemPlain, ip), append(idemTraced, it), append(idemRatios, it/ip)
		lockCPU, idemCPU = append(lockCPU, lct/lcp), append(idemCPU, ict/icp)
	}
	return otelResult{medianOf(lockPlain), medianOf(lockTraced), medianOf(lockRatios), medianOf(lockCPU)},
		otelResult{medianOf(idemPlain), medianOf(idemTraced), medianOf(idemRatios), medianOf(idemCPU)}, nil
}

// cpuPerOp runs f, which returns operations per second, and returns this
// process's CPU time (user and system) per operation during f.
func cpuPerOp(f func() float64) float64 {
	c0, t0 := cpuTime(), time.Now()
	rate := f()
	ops := rate * time.Since(t0).Seconds()
	return (cpuTime() - c0).Seconds() / max(ops, 1)
}
