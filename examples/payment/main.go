// Command payment is a payment service with every layer of the processing
// skeleton in place:
//
//	validate -> claim (Redis, then PostgreSQL) -> lock the account -> fence
//	-> state check -> deduct -> UNPAID->PAID -> ledger (unique index, the
//	last gate) -> record the answer -> publish the event
//
// and a consumer that turns each payment event into one receipt, however
// often the event is delivered. Run two instances on one Redis and one
// PostgreSQL and put the retrying client in front of them:
//
//	go run ./examples/payment --listen :8081 --name a
//	go run ./examples/payment --listen :8082 --name b
//	go run ./examples/payment pay --servers http://127.0.0.1:8081,http://127.0.0.1:8082 \
//	    --order o-1 --account alice --amount 1500
//
// Routes: POST /pay (Idempotency-Key header required), POST /accounts,
// GET /accounts/{id}, GET /orders/{id}, GET /healthz, GET /metrics
// (Prometheus). With OTEL_EXPORTER_OTLP_ENDPOINT set, both the service and
// the pay command export traces over OTLP, the client's traceparent reaching
// the instances. See README.md.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/idem"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 && os.Args[1] == "pay" {
		err = payCommand(ctx, os.Args[2:], os.Stdout, os.Stderr)
	} else {
		err = serveCommand(ctx, os.Args[1:], os.Stderr)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "payment:", err)
		os.Exit(1)
	}
}

// serveCommand runs one instance until ctx ends.
func serveCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("payment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":8081", "HTTP listen address")
	redisURL := fs.String("redis", "redis://127.0.0.1:6379/0", "Redis URL (locks, idempotency front store, event stream)")
	pgURL := fs.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL (accounts, orders, ledger, idempotency records, inbox)")
	name := fs.String("name", "", "instance name (default: host-port)")
	prefix := fs.String("prefix", "payment:", "prefix of every Redis key")
	consume := fs.Bool("consumer", true, "run the receipts consumer in this instance")
	lockTTL := fs.Duration("lock-ttl", 10*time.Second, "lease on an account lock (renewed while held)")
	verbose := fs.Bool("v", false, "log every request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if *name == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(*listen)
		*name = strings.Trim(host+"-"+port, "-")
	}

	ropt, err := redis.ParseURL(*redisURL)
	if err != nil {
		return fmt.Errorf("--redis: %w", err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	db, err := sql.Open("pgx", *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres: %w", err)
	}
	defer db.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	tr, tel, err := startTracing(ctx, "latchkey-payment")
	if err != nil {
		return err
	}
	if tr != nil {
		defer shutdownTracing(tr, logger)
		tel.ObserveRefusals() // stale fenced writes and refused order moves, as events on the payment's span
	}
	s, err := newService(ctx, Config{Name: *name, Prefix: *prefix, Consume: *consume, LockTTL: *lockTTL, Logger: logger, Registry: reg, Telemetry: tel}, db, rdb)
	if err != nil {
		return err
	}
	defer s.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	handler := s.Handler()
	if tr != nil {
		handler = otelhttp.NewHandler(handler, "payment", otelhttp.WithTracerProvider(tr.Provider),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.Pattern }))
		logger.Info("exporting traces over OTLP", "protocol", tr.Protocol)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	bg, stopBG := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(bg) }()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("payment service listening", "instance", *name, "addr", ln.Addr().String())

	select {
	case err = <-served:
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = srv.Shutdown(shut)
		cancel()
	}
	stopBG()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// payCommand sends one payment through the retrying client and prints every
// attempt and the answer.
func payCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("payment pay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.String("servers", "http://127.0.0.1:8081,http://127.0.0.1:8082", "comma-separated instance URLs")
	key := fs.String("key", "", "idempotency key (default: a new random one)")
	order := fs.String("order", "", "order id")
	account := fs.String("account", "", "account to charge")
	amount := fs.Int64("amount", 0, "amount in cents")
	timeout := fs.Duration("timeout", 5*time.Second, "time limit of each attempt")
	if err := fs.Parse(args); err != nil {
		return err
	}
	req := payRequest{OrderID: *order, Account: *account, Amount: *amount}
	if err := req.validate(); err != nil {
		return err
	}
	if *key == "" {
		*key = idem.NewToken()
	}
	c := &Client{
		Servers: strings.Split(*servers, ","),
		Timeout: func(int) time.Duration { return *timeout },
		OnAttempt: func(a Attempt) {
			switch {
			case a.Err != nil:
				fmt.Fprintf(stderr, "attempt %d %s: %v\n", a.N, a.Server, a.Err)
			default:
				fmt.Fprintf(stderr, "attempt %d %s: %d %s replayed=%t\n", a.N, a.Server, a.Status, a.Code, a.Replayed)
			}
		},
	}
	tr, _, err := startTracing(ctx, "latchkey-payment-client")
	if err != nil {
		return err
	}
	if tr != nil {
		defer shutdownTracing(tr, slog.New(slog.NewTextHandler(stderr, nil)))
		// Each attempt is a client span whose traceparent reaches the
		// instance, all under one span of the payment.
		c.HTTP = &http.Client{Transport: otelhttp.NewTransport(http.DefaultTransport, otelhttp.WithTracerProvider(tr.Provider))}
		var span trace.Span
		ctx, span = tr.Provider.Tracer("payment").Start(ctx, "pay")
		defer span.End()
	}
	ans, err := c.Pay(ctx, *key, req)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d from %s after %d attempt(s), replayed=%t: %s\n", ans.Status, ans.Instance, ans.Attempts, ans.Replayed, bytes.TrimSpace(ans.Body))
	return nil
}
