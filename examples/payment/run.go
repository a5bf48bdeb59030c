package main

import (
	"context"
	"sync"
	"time"
)

// purgeEvery is how often an instance deletes expired idempotency records and
// inbox ids.
const purgeEvery = time.Hour

// Run does the instance's background work until ctx ends: the event relay,
// the purge of expired records and, with Config.Consume, the receipts
// consumer. It returns when all have stopped.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.relay(ctx) })
	wg.Go(func() { s.purge(ctx) })
	if s.cfg.Consume {
		wg.Go(func() {
			if err := s.consume(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("consumer stopped", "err", err)
			}
		})
	}
	wg.Wait()
}

// purge deletes, every purgeEvery, the idempotency records whose retention
// ended and the inbox ids older than the inbox's retention (24 h): a copy of
// an event older than that is no longer recognised, so the stream's producers
// must not redeliver that late.
func (s *Service) purge(ctx context.Context) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.back.Purge(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("purging idempotency records failed", "err", err)
		}
		if _, err := s.inbox.Purge(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("purging inbox ids failed", "err", err)
		}
	}
}
