package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisconsumer"
)

// receiptsGroup is the consumer group that turns payment events into
// receipts.
const receiptsGroup = "receipts"

// consume runs this instance's member of the receipts group until ctx ends.
// Every event is delivered at least once (a republished copy, a relayed
// duplicate, a redelivery after a failure or a crash); the transactional inbox
// makes its effect, one receipt counted and its amount added, happen once.
func (s *Service) consume(ctx context.Context) error {
	c, err := redisconsumer.New(s.rdb, s.stream, receiptsGroup, s.cfg.Name, s.handleEvent,
		redisconsumer.WithMinIdle(s.cfg.ConsumerMinIdle),
		redisconsumer.WithBlock(s.cfg.ConsumerBlock),
		redisconsumer.WithErrorHandler(func(ctx context.Context, err error) {
			var ee *redisconsumer.EntryError
			if errors.As(err, &ee) { // its message says the payment id; keep ids out of the log
				s.log.Warn("payment event left pending for redelivery", "entry", ee.EntryID, "err", ee.Err)
				return
			}
			s.log.Warn("payment event stream failed", "err", err)
		}))
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// handleEvent is the dedup.Handler the stream consumer calls.
func (s *Service) handleEvent(ctx context.Context, m dedup.Message) error {
	start := time.Now()
	out, err := s.inbox.Process(ctx, m, s.applyReceipt)
	s.observeEvent(ctx, out, err, time.Since(start))
	switch out {
	case dedup.OutcomeProcessed:
		s.stats.receipts.Add(1)
	case dedup.OutcomeDuplicate:
		s.stats.receiptDups.Add(1)
	}
	return err
}

// applyReceipt is the effect of one payment event, in the inbox's
// transaction: it is not idempotent by itself (it adds), which is the point.
func (s *Service) applyReceipt(ctx context.Context, tx *sql.Tx, m dedup.Message) error {
	if s.beforeReceipt != nil {
		if err := s.beforeReceipt(m.ID); err != nil {
			return err
		}
	}
	var ev paymentEvent
	if err := json.Unmarshal(m.Body, &ev); err != nil {
		return fmt.Errorf("payment: undecodable event: %w", err)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO receipts (account, count, total) VALUES ($1, 1, $2)
ON CONFLICT (account) DO UPDATE SET count = receipts.count + 1, total = receipts.total + excluded.total`,
		ev.Account, ev.Amount)
	return err
}
