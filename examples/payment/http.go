package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// errInvalid marks a request the service refuses to read.
var errInvalid = errors.New("payment: invalid request")

// maxAmount keeps sums of amounts far from int64 overflow.
const maxAmount = 1 << 40

// maxIDLen bounds account, order and instance ids.
const maxIDLen = 64

// checkID accepts 1 to 64 of [A-Za-z0-9_.-].
func checkID(field, v string) error {
	if v == "" || len(v) > maxIDLen {
		return fmt.Errorf("%w: %s must be 1 to %d characters", errInvalid, field, maxIDLen)
	}
	for _, c := range []byte(v) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %s may hold only letters, digits, '_', '.' and '-'", errInvalid, field)
		}
	}
	return nil
}

// handlePay is POST /pay, behind the idempotency middleware.
func (s *Service) handlePay(w http.ResponseWriter, r *http.Request) {
	var req payRequest
	if err := readJSON(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := req.validate(); err != nil {
		s.writeError(w, err)
		return
	}
	// The key as the idempotency middleware read it (quotes removed); it
	// refused the request had the header been missing or malformed.
	key, _ := idemhttp.ParseKey(r.Header.Get(idemhttp.DefaultHeader))
	p, how, err := s.pay(r.Context(), key, req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	status := http.StatusCreated
	switch how {
	case recovered:
		// The first request's answer was lost after its commit: it counted
		// and published nothing, so this answer does both (the consumer
		// takes an event it already had once).
		s.stats.recovered.Add(1)
		s.log.Info("a payment committed by an earlier request with this key, whose answer was lost, answered now")
		fallthrough
	case made:
		s.stats.paid.Add(1)
		s.publishPayment(r.Context(), p)
	case paidEarlier:
		s.stats.duplicates.Add(1)
		status = http.StatusOK // the order had been paid, under another key
	}
	s.writeJSON(w, status, p)
}

// accountView is the answer of GET /accounts/{id}.
type accountView struct {
	ID         string `json:"id"`
	Balance    int64  `json:"balance"`
	FenceToken uint64 `json:"fence_token"`
	Payments   int64  `json:"payments"`
	Paid       int64  `json:"paid"`
	Receipts   int64  `json:"receipts"`
	Received   int64  `json:"receipts_total"`
}

// handleCreateAccount is POST /accounts {"id": ..., "balance": ...}. It
// answers 409 if the account exists.
func (s *Service) handleCreateAccount(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID      string `json:"id"`
		Balance int64  `json:"balance"`
	}
	if err := readJSON(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := checkID("id", req.ID); err != nil {
		s.writeError(w, err)
		return
	}
	if req.Balance < 0 || req.Balance > maxAmount {
		s.writeError(w, fmt.Errorf("%w: balance must be between 0 and %d", errInvalid, int64(maxAmount)))
		return
	}
	res, err := s.db.ExecContext(r.Context(), `INSERT INTO accounts (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, req.ID, req.Balance)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		writeProblem(w, http.StatusConflict, "account-exists", "the account exists already")
		return
	}
	s.writeAccount(w, r, req.ID, http.StatusCreated)
}

// handleAccount is GET /accounts/{id}: the balance, and the ledger and
// receipts totals that must agree with it.
func (s *Service) handleAccount(w http.ResponseWriter, r *http.Request) {
	s.writeAccount(w, r, r.PathValue("id"), http.StatusOK)
}

func (s *Service) writeAccount(w http.ResponseWriter, r *http.Request, id string, status int) {
	if err := checkID("id", id); err != nil {
		s.writeError(w, err)
		return
	}
	v := accountView{ID: id}
	err := s.db.QueryRowContext(r.Context(), `SELECT a.balance, a.fence_token,
	(SELECT count(*) FROM ledger WHERE account = a.id), (SELECT coalesce(sum(amount), 0) FROM ledger WHERE account = a.id),
	coalesce(rc.count, 0), coalesce(rc.total, 0)
FROM accounts a LEFT JOIN receipts rc ON rc.account = a.id WHERE a.id = $1`, id).
		Scan(&v.Balance, &v.FenceToken, &v.Payments, &v.Paid, &v.Receipts, &v.Received)
	if err != nil {
		s.writeError(w, notFound(err, errNoAccount))
		return
	}
	s.writeJSON(w, status, v)
}

// orderView is the answer of GET /orders/{id}.
type orderView struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
	Status  string `json:"status"`
}

var errNoOrder = errors.New("payment: no such order")

// handleOrder is GET /orders/{id}.
func (s *Service) handleOrder(w http.ResponseWriter, r *http.Request) {
	v := orderView{ID: r.PathValue("id")}
	if err := checkID("id", v.ID); err != nil {
		s.writeError(w, err)
		return
	}
	err := s.db.QueryRowContext(r.Context(), `SELECT account, amount, status FROM orders WHERE id = $1`, v.ID).
		Scan(&v.Account, &v.Amount, &v.Status)
	if err != nil {
		s.writeError(w, notFound(err, errNoOrder))
		return
	}
	s.writeJSON(w, http.StatusOK, v)
}

// handleHealth is GET /healthz: both stores answer, and what the layers
// caught so far in this instance.
func (s *Service) handleHealth(w http.ResponseWriter, r *http.Request) {
	if err := s.db.PingContext(r.Context()); err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "database-unavailable", "the database does not answer")
		return
	}
	if err := s.rdb.Ping(r.Context()).Err(); err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "redis-unavailable", "redis does not answer")
		return
	}
	s.writeJSON(w, http.StatusOK, s.counters())
}

// counters is what /healthz reports.
func (s *Service) counters() map[string]any {
	return map[string]any{
		"status": "ok", "instance": s.cfg.Name,
		"paid": s.stats.paid.Load(), "duplicates": s.stats.duplicates.Load(), "recovered": s.stats.recovered.Load(),
		"fenced": s.stats.fenced.Load(), "last_gate": s.stats.lastGate.Load(),
		"lease_lost_after_commit": s.stats.leaseLost.Load(),
		"events_published":        s.stats.published.Load(), "events_relayed": s.stats.relayed.Load(),
		"receipts": s.stats.receipts.Load(), "receipt_duplicates": s.stats.receiptDups.Load(),
	}
}

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: the body is not the expected JSON object", errInvalid)
	}
	return nil
}

func (s *Service) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Instance", s.cfg.Name)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError answers err as application/problem+json. Business refusals are
// 4xx, which the idempotency layer records and replays; a fenced write, a busy
// account and failures are 5xx, which it does not, so a retry runs again.
func (s *Service) writeError(w http.ResponseWriter, err error) {
	w.Header().Set("X-Instance", s.cfg.Name)
	switch {
	case errors.Is(err, errInvalid):
		writeProblem(w, http.StatusBadRequest, "invalid-request", err.Error())
	case errors.Is(err, errNoAccount):
		writeProblem(w, http.StatusNotFound, "no-account", "no such account")
	case errors.Is(err, errNoOrder):
		writeProblem(w, http.StatusNotFound, "no-order", "no such order")
	case errors.Is(err, errInsufficient):
		writeProblem(w, http.StatusPaymentRequired, "insufficient-funds", "the balance is lower than the amount; the order is FAILED")
	case errors.Is(err, errOrderMismatch):
		writeProblem(w, http.StatusConflict, "order-mismatch", "the order exists with another account or amount")
	case errors.Is(err, errOrderFailed):
		writeProblem(w, http.StatusConflict, "order-failed", "the order failed earlier and cannot be paid")
	case errors.Is(err, errLastGate):
		writeProblem(w, http.StatusConflict, "duplicate-payment", "the ledger already holds a payment for this order; nothing was charged")
	case errors.Is(err, errFenced):
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "lock-lost", "this instance lost the account lock before writing; nothing was charged, retry")
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "account-busy", "the account is locked by another payment; retry")
	default:
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			s.log.Error("request failed", "err", err)
		}
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusServiceUnavailable, "unavailable", "the payment could not be processed; nothing was charged, retry")
	}
}

func notFound(err, sentinel error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return sentinel
	}
	return err
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	b, _ := json.Marshal(map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status, "code": code, "detail": detail,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// servedByHeader names the instance that answered this request; X-Instance,
// which a replay repeats, names the one that made the answer.
const servedByHeader = "X-Served-By"

// logRequests sets X-Served-By and logs one line per request: method, route, status, duration.
// Never keys, bodies or ids.
func (s *Service) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set(servedByHeader, s.cfg.Name)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		level := slog.LevelDebug
		if sw.status >= 500 {
			level = slog.LevelWarn
		}
		s.log.Log(r.Context(), level, "request", "method", r.Method, "route", r.Pattern,
			"status", strconv.Itoa(sw.status), "replayed", w.Header().Get("Idempotent-Replayed") == "true",
			"ms", time.Since(start).Milliseconds())
	})
}

// statusWriter remembers the status written through it, for the log line.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader implements http.ResponseWriter.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}
