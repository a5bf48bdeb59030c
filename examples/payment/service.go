package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/sqlinbox"
	"github.com/latchkey-go/latchkey/fence/sqlfence"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/layered"
	"github.com/latchkey-go/latchkey/idem/redisstore"
	"github.com/latchkey-go/latchkey/idem/sqlstore"
	"github.com/latchkey-go/latchkey/latchkeyotel"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/redislock"
	"github.com/latchkey-go/latchkey/state"
)

// Config is one instance's configuration. The zero value of every duration
// means its default.
type Config struct {
	// Name identifies the instance in responses (X-Instance), the ledger and
	// the consumer group. Default: the host name.
	Name string
	// Prefix starts every Redis key and the stream name, so several
	// deployments share one Redis. Default: "payment:".
	Prefix string
	// LockTTL is the lease on an account while its balance is changed; it is
	// renewed while held. Default: 10 s.
	LockTTL time.Duration
	// LockWait bounds how long a payment waits for its account's lock before
	// answering 503. Default: 10 s.
	LockWait time.Duration
	// InProgress is how long a payment's idempotency claim lasts before a
	// retry may take it over (the handler is stopped then). Default: 30 s.
	InProgress time.Duration
	// RelayEvery is how often the relay publishes ledger rows whose event was
	// not confirmed; RelayAfter is how old such a row must be. Defaults: 5 s
	// and 10 s.
	RelayEvery, RelayAfter time.Duration
	// Consume runs the receipts consumer in this instance.
	Consume bool
	// ConsumerMinIdle is how long an event left unacknowledged by a consumer
	// waits before another takes it over. Default: 30 s.
	ConsumerMinIdle time.Duration
	// ConsumerBlock is how long one read of the stream blocks. Default: 2 s.
	ConsumerBlock time.Duration
	// Logger receives the service's log. Default: slog.Default().
	Logger *slog.Logger
	// Registry, if set, receives latchkey's lock, idempotency and dedup
	// collectors, and GET /metrics serves it. Default: none (no /metrics).
	Registry *prometheus.Registry
	// Telemetry, if set, makes spans of the account locks, the /pay
	// middleware (a replay is an event on the request's span) and the
	// receipts. Default: none.
	Telemetry *latchkeyotel.Telemetry
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.LockTTL, 10*time.Second)
	def(&c.LockWait, 10*time.Second)
	def(&c.InProgress, 30*time.Second)
	def(&c.RelayEvery, 5*time.Second)
	def(&c.RelayAfter, 10*time.Second)
	def(&c.ConsumerMinIdle, 30*time.Second)
	def(&c.ConsumerBlock, 2*time.Second)
	if c.Prefix == "" {
		c.Prefix = "payment:"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// The order states and the moves between them.
const (
	statusUnpaid = "UNPAID"
	statusPaid   = "PAID"
	statusFailed = "FAILED"
)

var orderMoves = []state.Transition{
	{From: statusUnpaid, To: statusPaid},
	{From: statusUnpaid, To: statusFailed},
}

// Service is one instance of the payment service: its HTTP handler and its
// background work (the event relay and, with Config.Consume, the consumer).
type Service struct {
	cfg    Config
	log    *slog.Logger
	db     *sql.DB
	rdb    redis.UniversalClient
	locker *redislock.Locker
	fence  *sqlfence.Guard
	orders *state.Machine
	idem   *layered.Store
	back   *sqlstore.Store
	inbox  *sqlinbox.Inbox
	stream string

	stats stats

	lockObserver  lock.Observer
	idemObserver  idemhttp.Observer
	guard         func(http.Handler) http.Handler // idempotency of POST /pay
	dedupObserver dedup.Observer
	metrics       http.Handler

	// beforeCharge, when set, runs after the account lock is taken and before
	// the charge's transaction: the place where a holder can stall (a GC
	// pause, a stopped process) for as long as its lease. Tests set it.
	beforeCharge func(ctx context.Context, lease *lock.Lease)
	// afterCommit, when set, runs after the charge committed; an error it
	// returns is the charge's, as when the commit's answer is lost.
	afterCommit func(ctx context.Context) error
	// beforeReceipt, when set, runs before an event's effect; an error fails
	// that delivery. Tests set it to make deliveries fail.
	beforeReceipt func(id string) error
}

// stats counts what the layers caught, for /healthz and the tests.
type stats struct {
	paid, duplicates, recovered, fenced, lastGate, leaseLost atomic.Int64
	published, relayed, receipts, receiptDups                atomic.Int64
}

// newService builds an instance on db and rdb and migrates the schema. It
// starts nothing: call Run for the background work and Handler for HTTP.
func newService(ctx context.Context, cfg Config, db *sql.DB, rdb redis.UniversalClient) (*Service, error) {
	cfg = cfg.withDefaults()
	if db == nil || rdb == nil {
		return nil, errors.New("payment: a database and a Redis client are required")
	}
	if err := checkID("name", cfg.Name); err != nil {
		return nil, err
	}
	guard, err := sqlfence.New(db, "accounts", sqlfence.WithDialect(sqlfence.Postgres))
	if err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	orders, err := state.NewMachine(db, "orders", orderMoves, state.WithDialect(state.Postgres))
	if err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	back, err := sqlstore.New(db, sqlstore.WithDialect(sqlstore.Postgres), sqlstore.WithTable("payment_idem"), sqlstore.WithTokenTable("payment_idem_tokens"))
	if err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	inbox, err := sqlinbox.New(db, sqlinbox.WithTable("receipts_inbox"))
	if err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	if err := migrate(ctx, db); err != nil {
		return nil, err
	}
	if err := back.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("payment: idempotency table: %w", err)
	}
	if err := inbox.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("payment: inbox table: %w", err)
	}
	locker, err := redislock.New(rdb, redislock.WithPrefix(cfg.Prefix+"lock:"))
	if err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	s := &Service{
		cfg: cfg, log: cfg.Logger.With("instance", cfg.Name),
		db: db, rdb: rdb, locker: locker, fence: guard, orders: orders, back: back, inbox: inbox,
		stream: cfg.Prefix + "events",
	}
	front := redisstore.New(rdb, redisstore.WithPrefix(cfg.Prefix+"idem:"))
	if cfg.Registry != nil {
		if err := s.instrument(cfg.Registry); err != nil {
			locker.Close()
			return nil, err
		}
	}
	if cfg.Telemetry != nil {
		s.trace(cfg.Telemetry)
	}
	if s.lockObserver != nil {
		locker.SetObserver(s.lockObserver)
	}
	s.idem = layered.New(front, back, layered.WithFrontErrors(func(err error) {
		s.log.Warn("idempotency front store failed; the database decides alone", "err", err)
	}))
	if s.guard, err = s.newGuard(); err != nil {
		locker.Close()
		return nil, fmt.Errorf("payment: %w", err)
	}
	return s, nil
}

// newGuard builds the idempotency middleware of POST /pay, so that a bad
// setting (an in-progress deadline out of range) fails New, not every payment.
func (s *Service) newGuard() (func(http.Handler) http.Handler, error) {
	opts := []idemhttp.Option{
		idemhttp.WithInProgress(s.cfg.InProgress),
		idemhttp.WithDropHeaders(servedByHeader),
		idemhttp.WithErrorHandler(func(r *http.Request, err error) {
			s.log.ErrorContext(r.Context(), "idempotency record failed", "err", err)
		}),
	}
	if s.idemObserver != nil {
		opts = append(opts, idemhttp.WithObserver(s.idemObserver))
	}
	return idemhttp.NewMiddleware(s.idem, opts...)
}

// Close releases the lock client's subscription. It does not close db or rdb,
// which the caller owns.
func (s *Service) Close() error { return s.locker.Close() }

// Handler returns the service's routes.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /pay", s.guard(http.HandlerFunc(s.handlePay)))
	mux.HandleFunc("POST /accounts", s.handleCreateAccount)
	mux.HandleFunc("GET /accounts/{id}", s.handleAccount)
	mux.HandleFunc("GET /orders/{id}", s.handleOrder)
	mux.HandleFunc("GET /healthz", s.handleHealth)
	mux.Handle("GET /metrics", s.metricsHandler())
	return s.logRequests(mux)
}
