package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/internal/otlpenv"
	"github.com/latchkey-go/latchkey/latchkeyotel"
	"github.com/latchkey-go/latchkey/lock"
)

// trace adds tel's observers beside the metrics' ones: the account locks
// (backend "redis"), the /pay middleware (handler "pay") and the receipts
// consumer. Spans carry those fixed names and bounded outcomes only: never
// keys, order ids, accounts or amounts.
func (s *Service) trace(tel *latchkeyotel.Telemetry) {
	s.lockObserver = lock.Observers(s.lockObserver, tel.LockObserver("redis", latchkeyotel.Server("redis", s.redisAddr())...))
	count, span := s.idemObserver, tel.HTTPObserver("pay")
	s.idemObserver = func(r *http.Request, e idemhttp.Event) {
		if count != nil {
			count(r, e)
		}
		span(r, e)
	}
	counted, spanned := s.dedupObserver, tel.DedupObserver(receiptsGroup)
	s.dedupObserver = func(ctx context.Context, e dedup.Event) {
		if counted != nil {
			counted(ctx, e)
		}
		spanned(ctx, e)
	}
}

// redisAddr is the first address the Redis client dials, for the
// server.address attribute; "" when it has none to tell.
func (s *Service) redisAddr() string {
	if c, ok := s.rdb.(*redis.Client); ok {
		return c.Options().Addr
	}
	return ""
}

// startTracing starts OTLP export when the OTEL_* environment asks for it
// (otlpenv.Enabled), and returns nil, nil, nil otherwise.
func startTracing(ctx context.Context, service string) (*otlpenv.Tracing, *latchkeyotel.Telemetry, error) {
	tr, err := otlpenv.Start(ctx, service)
	if err != nil || tr == nil {
		return nil, nil, err
	}
	tel, err := latchkeyotel.New(latchkeyotel.WithTracerProvider(tr.Provider))
	if err != nil {
		return nil, nil, err
	}
	return tr, tel, nil
}

// shutdownTracing exports the spans still buffered, for at most 5 s.
func shutdownTracing(tr *otlpenv.Tracing, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		log.Warn("exporting the last spans", "err", err)
	}
}
