package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/state"
)

// Errors of a payment. Each maps to one HTTP answer (see writeError).
var (
	errNoAccount     = errors.New("payment: no such account")
	errOrderMismatch = errors.New("payment: the order exists with another account or amount")
	errOrderFailed   = errors.New("payment: the order failed earlier")
	errInsufficient  = errors.New("payment: insufficient funds")
	errLastGate      = errors.New("payment: the ledger already holds this payment")
	errFenced        = errors.New("payment: the account lock was lost; a later holder has written")
	errBusy          = errors.New("payment: the account is busy")
)

// payRequest is the body of POST /pay. Amounts are in minor units (cents).
type payRequest struct {
	OrderID string `json:"order_id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

func (r payRequest) validate() error {
	if err := checkID("order_id", r.OrderID); err != nil {
		return err
	}
	if err := checkID("account", r.Account); err != nil {
		return err
	}
	if r.Amount <= 0 || r.Amount > maxAmount {
		return fmt.Errorf("%w: amount must be between 1 and %d", errInvalid, int64(maxAmount))
	}
	return nil
}

// payment is the answer to a successful POST /pay, built from the ledger row,
// so a duplicate answered from the ledger reads exactly like the original.
type payment struct {
	PaymentID    string `json:"payment_id"`
	OrderID      string `json:"order_id"`
	Account      string `json:"account"`
	Amount       int64  `json:"amount"`
	BalanceAfter int64  `json:"balance_after"`
	Status       string `json:"status"`
}

// paymentID is the ledger's unique key: an order is paid at most once.
func paymentID(orderID string) string { return "pay-" + orderID }

// An origin says who made the payment a successful pay returns; a failed
// one returns 0.
type origin int

const (
	// made: this call charged the account.
	made origin = iota + 1
	// recovered: an earlier request with this call's idempotency key
	// charged the account, and its answer was lost. Its commit reached the
	// database, but the request ended in an error (a client that gave up
	// while the commit was on its way cancels the request, and the driver
	// then reports the commit as failed), so the idempotency layer kept no
	// answer and let the retry run. The retry is answered as the first
	// request would have been.
	recovered
	// paidEarlier: the order was paid under another idempotency key.
	paidEarlier
)

// pay runs the processing skeleton's business part for a request the
// idempotency layer has already claimed under key: lock the account, then, in
// one transaction, fence the account row, check the order's state, deduct,
// move the order to PAID and write the ledger row (the last gate). It returns
// the payment and who made it.
func (s *Service) pay(ctx context.Context, key string, req payRequest) (payment, origin, error) {
	var (
		p   payment
		how origin
		ran bool
		err error
	)
	lockErr := lock.Do(ctx, s.locker, "account:"+req.Account, func(lctx context.Context, lease *lock.Lease) error {
		ran = true
		if s.beforeCharge != nil {
			s.beforeCharge(lctx, lease)
		}
		// The transaction runs on the request's context, not the lease's: a
		// check of the lease before writing would leave a gap between the
		// check and the write, and the fence closes it in the statement
		// itself. A lost lease only matters if someone else wrote since, and
		// then the fence refuses.
		p, how, err = s.charge(ctx, lease, key, req)
		return err
	}, lock.WithTTL(s.cfg.LockTTL), lock.WithWait(s.cfg.LockWait))
	switch {
	case !ran && errors.Is(lockErr, lock.ErrNotAcquired):
		return payment{}, 0, errBusy
	case !ran:
		return payment{}, 0, lockErr
	case errors.Is(err, errFenced):
		s.stats.fenced.Add(1)
		s.log.Warn("stale lock holder fenced off; nothing written")
	case err == nil && errors.Is(lockErr, lock.ErrLeaseLost):
		// The charge committed before the loss was seen. The fence accepted
		// it, so no later holder had written: the outcome stands.
		s.stats.leaseLost.Add(1)
		s.log.Warn("account lease lost after the charge committed; the fence had accepted the write")
	}
	return p, how, err
}

// charge is the business transaction.
func (s *Service) charge(ctx context.Context, lease *lock.Lease, key string, req payRequest) (payment, origin, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return payment{}, 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	// 1. Fence first: the statement refuses a token older than the row's,
	// raises the row's token to ours and holds the row until we commit, so
	// everything read below is what our write will be based on.
	switch err := s.fence.In(tx).Update(ctx, lease, req.Account, map[string]any{"updated_at": time.Now()}); {
	case errors.Is(err, fence.ErrStale):
		return payment{}, 0, errFenced
	case errors.Is(err, fence.ErrNotFound):
		return payment{}, 0, errNoAccount
	case err != nil:
		return payment{}, 0, err
	}

	// 2. The order, created on its first payment, and its state.
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, account, amount) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`,
		req.OrderID, req.Account, req.Amount); err != nil {
		return payment{}, 0, err
	}
	var (
		account string
		amount  int64
		status  string
	)
	if err := tx.QueryRowContext(ctx, `SELECT account, amount, status FROM orders WHERE id = $1`, req.OrderID).
		Scan(&account, &amount, &status); err != nil {
		return payment{}, 0, err
	}
	if account != req.Account || amount != req.Amount {
		return payment{}, 0, errOrderMismatch
	}
	switch status {
	case statusPaid:
		tx.Rollback() //nolint:errcheck // nothing was changed that must stay
		return s.paidBefore(ctx, key, req.OrderID)
	case statusFailed:
		return payment{}, 0, errOrderFailed
	}

	// 3. The deduction, on the balance read under our fenced row lock.
	var balance int64
	if err := tx.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = $1`, req.Account).Scan(&balance); err != nil {
		return payment{}, 0, err
	}
	if balance < req.Amount {
		if _, err := s.orders.In(tx).Move(ctx, req.OrderID, statusFailed, nil); err != nil {
			return payment{}, 0, err
		}
		if err := tx.Commit(); err != nil {
			return payment{}, 0, err
		}
		return payment{}, 0, errInsufficient
	}
	after := balance - req.Amount
	if err := s.fence.In(tx).Update(ctx, lease, req.Account, map[string]any{"balance": after}); err != nil {
		if errors.Is(err, fence.ErrStale) {
			return payment{}, 0, errFenced
		}
		return payment{}, 0, err
	}

	// 4. The state machine: UNPAID -> PAID in one conditional UPDATE.
	res, err := s.orders.In(tx).Move(ctx, req.OrderID, statusPaid, map[string]any{"updated_at": time.Now()})
	switch {
	case err != nil:
		return payment{}, 0, err
	case res == state.Duplicate:
		tx.Rollback() //nolint:errcheck // undo the deduction
		return s.paidBefore(ctx, key, req.OrderID)
	}

	// 5. The ledger row: its unique index on payment_id is the last gate.
	p := payment{PaymentID: paymentID(req.OrderID), OrderID: req.OrderID, Account: req.Account,
		Amount: req.Amount, BalanceAfter: after, Status: statusPaid}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger (payment_id, order_id, account, amount, balance_after, instance, idem_key)
VALUES ($1, $2, $3, $4, $5, $6, $7)`, p.PaymentID, p.OrderID, p.Account, p.Amount, p.BalanceAfter, s.cfg.Name, key); err != nil {
		if isUniqueViolation(err) {
			s.stats.lastGate.Add(1)
			return payment{}, 0, errLastGate
		}
		return payment{}, 0, err
	}
	if err := tx.Commit(); err != nil {
		return payment{}, 0, err
	}
	if s.afterCommit != nil {
		if err := s.afterCommit(ctx); err != nil {
			return payment{}, 0, err
		}
	}
	return p, made, nil
}

// paidBefore reads the payment of an order that is already paid, and says
// whether a request with key made it (recovered) or another (paidEarlier).
func (s *Service) paidBefore(ctx context.Context, key, orderID string) (payment, origin, error) {
	p := payment{Status: statusPaid}
	var by sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT payment_id, order_id, account, amount, balance_after, idem_key FROM ledger WHERE order_id = $1`, orderID).
		Scan(&p.PaymentID, &p.OrderID, &p.Account, &p.Amount, &p.BalanceAfter, &by)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return payment{}, 0, errors.New("payment: a PAID order has no ledger row")
	case err != nil:
		return payment{}, 0, err
	case key != "" && by.Valid && by.String == key:
		return p, recovered, nil
	}
	return p, paidEarlier, nil
}

func isUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "23505"
}
