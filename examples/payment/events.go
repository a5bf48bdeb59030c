package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisconsumer"
)

// paymentEvent is the body of a payment's event on the stream.
type paymentEvent struct {
	PaymentID string `json:"payment_id"`
	OrderID   string `json:"order_id"`
	Account   string `json:"account"`
	Amount    int64  `json:"amount"`
}

// eventTimeout bounds one publication.
const eventTimeout = 5 * time.Second

// publishPayment sends a committed payment's event and marks its ledger row
// published. It runs detached from the client's context: the payment has
// happened whether or not the client still waits. A failure is left to the
// relay, so the event is sent at least once, and sometimes twice (the relay
// may send a row whose first publication succeeded but was not marked): the
// consumer deduplicates.
func (s *Service) publishPayment(ctx context.Context, p payment) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventTimeout)
	defer cancel()
	if err := s.publish(ctx, p); err != nil {
		s.log.Warn("payment event not published; the relay will send it", "err", err)
		return
	}
	s.stats.published.Add(1)
}

func (s *Service) publish(ctx context.Context, p payment) error {
	body, err := json.Marshal(paymentEvent{PaymentID: p.PaymentID, OrderID: p.OrderID, Account: p.Account, Amount: p.Amount})
	if err != nil {
		return err
	}
	if _, err := redisconsumer.Publish(ctx, s.rdb, s.stream, dedup.Message{ID: p.PaymentID, Body: body}); err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `UPDATE ledger SET published_at = now() WHERE payment_id = $1 AND published_at IS NULL`, p.PaymentID)
	return err
}

// relay publishes, every RelayEvery, the ledger rows older than RelayAfter
// whose event was not confirmed, until ctx ends. Several instances may relay
// the same row at once; the consumer takes each payment once.
func (s *Service) relay(ctx context.Context) {
	t := time.NewTicker(s.cfg.RelayEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.relayOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("event relay failed", "err", err)
		}
		if n > 0 {
			s.stats.relayed.Add(int64(n))
			s.log.Info("events relayed", "count", n)
		}
	}
}

// relayOnce publishes one batch of unconfirmed events and says how many.
func (s *Service) relayOnce(ctx context.Context) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT payment_id, order_id, account, amount FROM ledger
WHERE published_at IS NULL AND created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT 100`,
		s.cfg.RelayAfter.Seconds())
	if err != nil {
		return 0, err
	}
	var batch []payment
	for rows.Next() {
		var p payment
		if err := rows.Scan(&p.PaymentID, &p.OrderID, &p.Account, &p.Amount); err != nil {
			rows.Close()
			return 0, err
		}
		batch = append(batch, p)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for i, p := range batch {
		if err := s.publish(ctx, p); err != nil {
			return i, err
		}
	}
	return len(batch), nil
}
