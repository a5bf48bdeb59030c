package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// post sends body to path on u with an optional idempotency key.
func post(t *testing.T, u, path, key, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func problemCode(t *testing.T, b []byte) string {
	t.Helper()
	var p struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not a problem document: %q", b)
	}
	return p.Code
}

// The layers behind the idempotency key: an order paid under one key and
// paid again under another is answered from the ledger (the state machine
// says PAID); if the order's state is wrongly reset, the ledger's unique index
// still refuses the second charge.
func TestStateMachineAndLastGate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: stormConfig()})
	const initial = 5_000
	h.createAccount("gina", initial)
	body := `{"order_id":"order-g","account":"gina","amount":1200}`

	st, hdr, first := post(t, h.a.url, "/pay", "key-1", body)
	if st != http.StatusCreated || hdr.Get("X-Instance") != "a" {
		t.Fatalf("first payment: %d %s", st, first)
	}
	st, hdr, replay := post(t, h.b.url, "/pay", "key-1", body)
	if st != http.StatusCreated || string(replay) != string(first) || hdr.Get("Idempotent-Replayed") != "true" || hdr.Get("X-Served-By") != "b" {
		t.Fatalf("replay on b: %d %v %s", st, hdr, replay)
	}
	// Another key (a client that lost its key): the order is PAID already.
	st, _, dup := post(t, h.b.url, "/pay", "key-2", body)
	if st != http.StatusOK || string(dup) != string(first) {
		t.Fatalf("same order, new key: %d %s, want 200 and the original payment", st, dup)
	}
	// The same key for a different payment.
	st, _, b := post(t, h.a.url, "/pay", "key-1", `{"order_id":"order-g","account":"gina","amount":1300}`)
	if st != http.StatusUnprocessableEntity {
		t.Fatalf("key reused for another body: %d %s", st, b)
	}
	// The same order with another amount, under a new key.
	st, _, b = post(t, h.a.url, "/pay", "key-3", `{"order_id":"order-g","account":"gina","amount":1300}`)
	if st != http.StatusConflict || problemCode(t, b) != "order-mismatch" {
		t.Fatalf("order with another amount: %d %s", st, b)
	}

	// An operator resets the order by hand; only the unique index is left.
	if _, err := h.db.Exec(`UPDATE orders SET status = 'UNPAID' WHERE id = 'order-g'`); err != nil {
		t.Fatal(err)
	}
	st, _, b = post(t, h.b.url, "/pay", "key-4", body)
	if st != http.StatusConflict || problemCode(t, b) != "duplicate-payment" {
		t.Fatalf("after the reset: %d %s, want 409 duplicate-payment", st, b)
	}
	if got := h.stat(func(s *stats) int64 { return s.lastGate.Load() }); got != 1 {
		t.Errorf("last gate refused %d payments, want 1", got)
	}
	if sum := h.checkLedger("gina", initial); sum != 1200 {
		t.Errorf("ledger sum %d, want 1200", sum)
	}
	var status string
	if err := h.db.QueryRow(`SELECT status FROM orders WHERE id = 'order-g'`).Scan(&status); err != nil || status != statusUnpaid {
		t.Errorf("the refused charge left the order %q (%v); its transaction should have rolled back", status, err)
	}
	h.waitReceipts("gina")

	// What the layers did, as Prometheus sees it.
	for _, m := range []struct {
		name, labels string
		want         float64
	}{
		{"latchkey_idem_requests_total", `handler="pay",outcome="executed"`, 4}, // 201, 200, 409 mismatch, 409 last gate
		{"latchkey_idem_requests_total", `handler="pay",outcome="replayed"`, 1},
		{"latchkey_idem_requests_total", `handler="pay",outcome="mismatch"`, 1},
		{"latchkey_lock_acquire_duration_seconds_count", `backend="redis",outcome="acquired"`, 4},
		{"latchkey_dedup_messages_total", `consumer="receipts",outcome="processed"`, 1},
	} {
		if got := h.metric(m.name, m.labels); got != m.want {
			t.Errorf("%s{%s} = %v, want %v", m.name, m.labels, got, m.want)
		}
	}
}

// Bad input is refused before anything is claimed, locked or written, and
// the read routes answer.
func TestRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: stormConfig()})
	h.createAccount("hank", 100)
	cases := []struct {
		name, key, body string
		status          int
		code            string
	}{
		{"no key", "", `{"order_id":"o1","account":"hank","amount":1}`, 400, "idempotency-key-missing"},
		{"zero amount", "k1", `{"order_id":"o1","account":"hank","amount":0}`, 400, "invalid-request"},
		{"bad order id", "k2", `{"order_id":"o 1","account":"hank","amount":1}`, 400, "invalid-request"},
		{"unknown field", "k3", `{"order_id":"o1","account":"hank","amount":1,"x":1}`, 400, "invalid-request"},
		{"no account", "k4", `{"order_id":"o1","account":"nobody","amount":1}`, 404, "no-account"},
		{"too much", "k5", `{"order_id":"o2","account":"hank","amount":101}`, 402, "insufficient-funds"},
		{"failed order", "k6", `{"order_id":"o2","account":"hank","amount":101}`, 409, "order-failed"},
	}
	for _, c := range cases {
		st, _, b := post(t, h.a.url, "/pay", c.key, c.body)
		if st != c.status || problemCode(t, b) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, b, c.status, c.code)
		}
	}
	if st, _, b := post(t, h.a.url, "/accounts", "", `{"id":"hank","balance":5}`); st != http.StatusConflict {
		t.Errorf("account created twice: %d %s", st, b)
	}
	for path, want := range map[string]int{
		"/accounts/hank": 200, "/accounts/nobody": 404, "/orders/o2": 200, "/orders/o9": 404, "/healthz": 200,
	} {
		resp, err := http.Get(h.b.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	if h.balance("hank") != 100 {
		t.Errorf("balance changed by refused requests")
	}
}
