package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/metrics"
)

// instrument registers latchkey's collectors on reg and plugs them into the
// account locks (backend "redis"), the /pay middleware (handler "pay") and
// the receipts consumer (consumer "receipts"). Labels carry those fixed names
// and bounded outcomes only: never keys, ids or amounts.
func (s *Service) instrument(reg *prometheus.Registry) error {
	locks, err := metrics.NewLock()
	if err != nil {
		return err
	}
	idm, err := metrics.NewIdem()
	if err != nil {
		return err
	}
	dd, err := metrics.NewDedup()
	if err != nil {
		return err
	}
	for _, c := range []prometheus.Collector{locks, idm, dd} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("payment: registering metrics: %w", err)
		}
	}
	s.lockObserver = locks.Observer("redis")
	s.idemObserver = idm.Observer("pay")
	s.dedupObserver = dd.Observer(receiptsGroup)
	s.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return nil
}

// observeEvent reports one event's handling to the dedup collector, as a
// dedup.Deduper would: the inbox is the deduplicator here.
func (s *Service) observeEvent(ctx context.Context, out dedup.Outcome, err error, took time.Duration) {
	if s.dedupObserver != nil {
		s.dedupObserver(ctx, dedup.Event{Outcome: out, Err: err, Duration: took})
	}
}

// metricsHandler serves /metrics, or 404 when the instance has no registry.
func (s *Service) metricsHandler() http.Handler {
	if s.metrics == nil {
		return http.NotFoundHandler()
	}
	return s.metrics
}
