package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/dedup/redisconsumer"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// stormConfig makes the background work fast enough for a test.
func stormConfig() Config {
	return Config{
		Consume: true, ConsumerMinIdle: 300 * time.Millisecond, ConsumerBlock: 100 * time.Millisecond,
		RelayEvery: 200 * time.Millisecond, RelayAfter: 2 * time.Second,
	}
}

// Storm (a): one payment sent by many clients at once, across both
// instances, with attempts timing out at random and retried under the same
// key. It is charged once, and every client ends with the same answer.
func TestStormSamePayment(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: stormConfig()})
	const initial, amount, clients = 100_000, 2_500, 24
	h.createAccount("alice", initial)
	req := payRequest{OrderID: "order-a", Account: "alice", Amount: amount}
	key := "storm-a-" + randHex(8)

	answers := make([]Answer, clients)
	errs := make([]error, clients)
	var attempts, timeouts atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c := h.client()
			c.Timeout = func(n int) time.Duration {
				if n <= 3 { // the first attempts may give up before, during or after the charge
					return time.Duration(1+rand.IntN(250)) * time.Millisecond
				}
				return 10 * time.Second
			}
			c.OnAttempt = func(a Attempt) {
				attempts.Add(1)
				if errors.Is(a.Err, context.DeadlineExceeded) {
					timeouts.Add(1)
				}
			}
			answers[i], errs[i] = c.Pay(context.Background(), key, req)
		})
	}
	wg.Wait()

	var originals int
	for i := range clients {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i, errs[i])
		}
		if answers[i].Status != http.StatusCreated {
			t.Fatalf("client %d: status %d %s", i, answers[i].Status, answers[i].Body)
		}
		if !bytes.Equal(answers[i].Body, answers[0].Body) {
			t.Errorf("client %d got %s, client 0 got %s", i, answers[i].Body, answers[0].Body)
		}
		if !answers[i].Replayed {
			originals++
		}
	}
	if originals > 1 {
		t.Errorf("%d clients got a freshly made answer; at most one may", originals)
	}
	h.checkChargedOnce("alice", answers[0].Body, initial, amount)
	h.waitReceipts("alice")
	t.Logf("%d clients, %d attempts (%d timed out), %d original answer(s)", clients, attempts.Load(), timeouts.Load(), originals)
}

// A payment whose commit reached the database while its request ended in an
// error (the client gave up while the commit was on its way, and the driver
// reported the commit as failed) leaves no stored answer, so the client's
// retry with the same key runs again. It finds the order paid by a request
// with its own key and answers as the first would have: 201, the payment,
// counted and published once, not 200 "paid under another key".
func TestRetryAfterLostCommitAnswerGets201(t *testing.T) {
	t.Parallel()
	var lost atomic.Int64
	h := newHarness(t, harnessOptions{cfg: stormConfig(), setup: func(name string, s *Service) {
		s.afterCommit = func(context.Context) error {
			if lost.Add(1) == 1 {
				return errors.New("the commit's answer was lost")
			}
			return nil
		}
	}})
	const initial, amount = 10_000, 1_200
	h.createAccount("dave", initial)
	req := payRequest{OrderID: "order-d", Account: "dave", Amount: amount}

	var statuses []int
	c := h.client()
	c.OnAttempt = func(a Attempt) { statuses = append(statuses, a.Status) }
	ans, err := c.Pay(context.Background(), "lost-d-"+randHex(8), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) < 2 || statuses[0] < 500 {
		t.Fatalf("attempts %v: the first should have failed after its commit", statuses)
	}
	if ans.Status != http.StatusCreated || ans.Replayed {
		t.Fatalf("retry after a lost answer: status %d, replayed %v, %s; want 201 made fresh", ans.Status, ans.Replayed, ans.Body)
	}
	h.checkChargedOnce("dave", ans.Body, initial, amount)
	if got := h.stat(func(s *stats) int64 { return s.duplicates.Load() }); got != 0 {
		t.Errorf("%d answers said the order was paid under another key", got)
	}
	h.waitReceipts("dave")

	// Another key for the same order is still a stranger to the payment.
	other, err := h.client().Pay(context.Background(), "lost-d-other-"+randHex(8), req)
	if err != nil || other.Status != http.StatusOK || !bytes.Equal(other.Body, ans.Body) {
		t.Errorf("the same order under another key: %v %d %s; want 200 with the same payment", err, other.Status, other.Body)
	}
}

// Storm (b): many different payments on one account at once, more than it
// can pay for. No update is lost, the balance never goes below zero, and the
// ledger explains the balance to the cent.
func TestStormManyPaymentsOneAccount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: stormConfig()})
	const initial, payments = 15_000, 30
	h.createAccount("bob", initial)

	amounts := make([]int64, payments)
	var asked int64
	for i := range amounts {
		amounts[i] = 300 + int64(rand.IntN(900))
		asked += amounts[i]
	}
	if asked <= initial {
		amounts[0] += initial // make sure some payments must fail
	}
	answers := make([]Answer, payments)
	errs := make([]error, payments)
	var wg sync.WaitGroup
	for i := range payments {
		wg.Go(func() {
			c := h.client()
			c.Timeout = func(n int) time.Duration {
				if n == 1 {
					return time.Duration(5+rand.IntN(60)) * time.Millisecond
				}
				return 10 * time.Second
			}
			req := payRequest{OrderID: fmt.Sprintf("order-b-%02d", i), Account: "bob", Amount: amounts[i]}
			answers[i], errs[i] = c.Pay(context.Background(), "storm-b-"+randHex(8), req)
		})
	}
	wg.Wait()

	var paidSum int64
	paid := map[string]int64{}
	failed := 0
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("payment %d: %v", i, errs[i])
		}
		order := fmt.Sprintf("order-b-%02d", i)
		switch a.Status {
		case http.StatusCreated:
			p := decodePayment(t, a.Body)
			if p.OrderID != order || p.Amount != amounts[i] {
				t.Errorf("payment %d answered %+v", i, p)
			}
			paid[order] = amounts[i]
			paidSum += amounts[i]
		case http.StatusPaymentRequired:
			failed++
		default:
			t.Fatalf("payment %d: status %d %s", i, a.Status, a.Body)
		}
	}
	if failed == 0 || len(paid) == 0 {
		t.Fatalf("%d paid, %d failed: the storm should have both", len(paid), failed)
	}
	if sum := h.checkLedger("bob", initial); sum != paidSum {
		t.Errorf("ledger sum %d, clients were told %d was paid", sum, paidSum)
	}
	for _, e := range h.ledger("bob") {
		if paid[e.OrderID] != e.Amount {
			t.Errorf("ledger row for %s (%d) was not answered 201 with that amount", e.OrderID, e.Amount)
		}
	}
	var nPaid, nFailed, nUnpaid int
	if err := h.db.QueryRow(`SELECT count(*) FILTER (WHERE status = 'PAID'), count(*) FILTER (WHERE status = 'FAILED'),
	count(*) FILTER (WHERE status = 'UNPAID') FROM orders`).Scan(&nPaid, &nFailed, &nUnpaid); err != nil {
		t.Fatal(err)
	}
	if nPaid != len(paid) || nFailed != failed || nUnpaid != 0 {
		t.Errorf("orders: %d PAID, %d FAILED, %d UNPAID; answers: %d paid, %d failed", nPaid, nFailed, nUnpaid, len(paid), failed)
	}
	h.waitReceipts("bob")
	t.Logf("%d payments: %d paid (%d cents), %d refused for funds; balance %d", payments, len(paid), paidSum, failed, h.balance("bob"))
}

// Storm (c): instance a takes the account lock and stalls past its lease
// (here: it is cut off from Redis, so renewal fails, and its goroutine
// waits). Instance b takes the lock with a higher token and charges. When a
// wakes and writes, the account row refuses its older token: nothing is
// deducted, a answers 503, and the client's retry is charged once.
func TestStormStaleHolderFenced(t *testing.T) {
	t.Parallel()
	proxy := testsvc.NewProxy(t, testsvc.RedisAddr(t))
	cfg := stormConfig()
	cfg.LockTTL = 300 * time.Millisecond
	paused, resume := make(chan uint64), make(chan struct{})
	var once sync.Once
	stall := func(_ context.Context, lease *lock.Lease) {
		once.Do(func() {
			paused <- lease.Token()
			<-resume
		})
	}
	h := newHarness(t, harnessOptions{cfg: cfg, redisA: proxy.Addr(), setup: func(name string, s *Service) {
		if name == "a" {
			s.beforeCharge = stall
		}
	}})
	const initial = 10_000
	h.createAccount("carol", initial)
	x := payRequest{OrderID: "order-c-1", Account: "carol", Amount: 3_000}
	y := payRequest{OrderID: "order-c-2", Account: "carol", Amount: 2_000}

	var ansX Answer
	var errX error
	var codes []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := &Client{Servers: []string{h.a.url}, MaxBackoff: 100 * time.Millisecond, Timeout: func(int) time.Duration { return 20 * time.Second },
			OnAttempt: func(a Attempt) { codes = append(codes, fmt.Sprint(a.Status, " ", a.Code)) }}
		ansX, errX = c.Pay(context.Background(), "storm-c-x", x)
	}()
	staleToken := <-paused
	proxy.Cut() // a can no longer renew: its lease runs out in Redis

	c := &Client{Servers: []string{h.b.url}, MaxBackoff: 100 * time.Millisecond}
	ansY, err := c.Pay(context.Background(), "storm-c-y", y)
	if err != nil || ansY.Status != http.StatusCreated {
		t.Fatalf("b's payment: %v %d %s", err, ansY.Status, ansY.Body)
	}
	var token uint64
	if err := h.db.QueryRow(`SELECT fence_token FROM accounts WHERE id = 'carol'`).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if token <= staleToken {
		t.Fatalf("b wrote with token %d, not above a's %d", token, staleToken)
	}
	proxy.Restore()
	close(resume) // a wakes with its old token and writes
	<-done
	if errX != nil || ansX.Status != http.StatusCreated {
		t.Fatalf("a's payment: %v %d %s", errX, ansX.Status, ansX.Body)
	}
	if len(codes) < 2 || codes[0] != "503 lock-lost" {
		t.Errorf("a's attempts: %v; the first should be fenced (503 lock-lost)", codes)
	}
	if got := h.a.s.stats.fenced.Load(); got != 1 {
		t.Errorf("a fenced %d stale writes, want 1", got)
	}
	if sum := h.checkLedger("carol", initial); sum != x.Amount+y.Amount {
		t.Errorf("ledger sum %d, want %d", sum, x.Amount+y.Amount)
	}
	if p := decodePayment(t, ansX.Body); p.BalanceAfter != initial-x.Amount-y.Amount {
		t.Errorf("a's retry charged from balance %d, want after b's payment", p.BalanceAfter+x.Amount)
	}
	h.waitReceipts("carol")
	t.Logf("stale token %d refused after token %d wrote; a's attempts: %v", staleToken, token, codes)
}

// Storm (d): every payment event reaches the consumers several times: the
// service's own publication, the relay's (the ledger rows are marked
// unpublished again), extra copies, and redeliveries after injected handler
// failures, on two consumers of one group. Each takes effect once.
func TestStormDuplicateEvents(t *testing.T) {
	t.Parallel()
	cfg := stormConfig()
	cfg.RelayAfter = time.Millisecond
	var injected atomic.Int64
	h := newHarness(t, harnessOptions{cfg: cfg, setup: func(_ string, s *Service) { s.beforeReceipt = failSomeReceipts(&injected) }})
	accounts := []string{"dave", "erin", "frank"}
	for _, a := range accounts {
		h.createAccount(a, 1_000_000)
	}

	const payments = 24
	var wg sync.WaitGroup
	for i := range payments {
		wg.Go(func() {
			req := payRequest{OrderID: fmt.Sprintf("order-d-%02d", i), Account: accounts[i%len(accounts)], Amount: int64(100 + i)}
			a, err := h.client().Pay(context.Background(), "storm-d-"+randHex(8), req)
			if err != nil || a.Status != http.StatusCreated {
				t.Errorf("payment %d: %v %d %s", i, err, a.Status, a.Body)
			}
		})
	}
	wg.Wait()

	// Duplicates: every event twice more by hand, and once more by the
	// relays of both instances.
	ctx := context.Background()
	for _, p := range ledgerPayments(t, h) {
		for range 2 {
			body := fmt.Sprintf(`{"payment_id":%q,"order_id":%q,"account":%q,"amount":%d}`, p.PaymentID, p.OrderID, p.Account, p.Amount)
			if _, err := redisconsumer.Publish(ctx, h.rdb, h.prefix+"events", dedup.Message{ID: p.PaymentID, Body: []byte(body)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := h.db.Exec(`UPDATE ledger SET published_at = NULL`); err != nil {
		t.Fatal(err)
	}
	waitRelayed(t, h)
	h.waitReceipts(accounts...)

	n, _ := h.rdb.XLen(ctx, h.prefix+"events").Result()
	var inbox int
	if err := h.db.QueryRow(`SELECT count(*) FROM receipts_inbox`).Scan(&inbox); err != nil {
		t.Fatal(err)
	}
	if inbox != payments {
		t.Errorf("inbox holds %d ids, want %d", inbox, payments)
	}
	processed := h.stat(func(s *stats) int64 { return s.receipts.Load() })
	dups := h.stat(func(s *stats) int64 { return s.receiptDups.Load() })
	if processed != payments {
		t.Errorf("%d receipts made, want %d", processed, payments)
	}
	if n < 4*payments || dups < 3*payments || injected.Load() == 0 {
		t.Errorf("the storm was too mild: %d entries, %d duplicates dropped, %d failures injected", n, dups, injected.Load())
	}
	t.Logf("%d payments, %d stream entries, %d duplicates dropped, %d failures redelivered, %d receipts", payments, n, dups, injected.Load(), processed)
}

// failSomeReceipts returns a receipt hook that fails the first delivery of
// every third new payment id, counting the failures in injected.
func failSomeReceipts(injected *atomic.Int64) func(string) error {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(id string) error {
		mu.Lock()
		defer mu.Unlock()
		if !seen[id] && len(seen)%3 == 0 {
			seen[id] = true
			injected.Add(1)
			return errors.New("injected receipt failure")
		}
		seen[id] = true
		return nil
	}
}

// ledgerPayments returns the payments in the ledger.
func ledgerPayments(t *testing.T, h *harness) []payment {
	t.Helper()
	rows, err := h.db.Query(`SELECT payment_id, order_id, account, amount FROM ledger`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var all []payment
	for rows.Next() {
		var p payment
		if err := rows.Scan(&p.PaymentID, &p.OrderID, &p.Account, &p.Amount); err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}
	return all
}

// waitRelayed waits up to 30 s for the relays to publish every ledger row.
func waitRelayed(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var unpublished int
		if err := h.db.QueryRow(`SELECT count(*) FROM ledger WHERE published_at IS NULL`).Scan(&unpublished); err != nil {
			t.Fatal(err)
		}
		if unpublished == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relays left %d events unpublished", unpublished)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
