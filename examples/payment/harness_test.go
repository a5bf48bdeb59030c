package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// harness is two instances of the service on the shared Redis and
// PostgreSQL, in a schema and under a key prefix of their own.
type harness struct {
	t      *testing.T
	db     *sql.DB // the test's own connection, for assertions
	rdb    *redis.Client
	prefix string
	a, b   *instance
}

// instance is one running service: its own connections, HTTP server on a
// real socket, and background work.
type instance struct {
	s   *Service
	url string
}

// harnessOptions change one instance's wiring.
type harnessOptions struct {
	cfg Config
	// redisA, if set, is the address instance a reaches Redis at (a proxy).
	redisA string
	// setup, if set, is called with each instance before it starts serving.
	setup func(name string, s *Service)
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	redisAddr := testsvc.RedisAddr(t)
	pgURL := schemaURL(t)
	prefix := testsvc.KeyPrefix(t)

	h := &harness{t: t, prefix: prefix}
	h.db = openDB(t, pgURL)
	h.rdb = redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() {
		dropKeys(h.rdb, prefix)
		h.rdb.Close()
	})

	cfg := o.cfg
	cfg.Prefix = prefix
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if testing.Verbose() {
			cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	}
	addrA := redisAddr
	if o.redisA != "" {
		addrA = o.redisA
	}
	h.a = h.start("a", cfg, pgURL, addrA, o.setup)
	h.b = h.start("b", cfg, pgURL, redisAddr, o.setup)
	return h
}

// schemaURL creates a PostgreSQL schema of the test's own, dropped when the
// test ends, and returns the database URL whose search_path names it: the
// service's unqualified table names resolve in it, so parallel tests and
// runs never share rows.
func schemaURL(t *testing.T) string {
	t.Helper()
	baseURL := testsvc.PostgresURL(t)
	schema := "pay_" + randHex(6)
	admin, err := sql.Open("pgx", baseURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(context.Background(), `CREATE SCHEMA `+schema); err != nil {
		admin.Close()
		testsvc.Unavailable(t, "postgres: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("dropping schema: %v", err)
		}
		admin.Close()
	})
	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// start runs one instance until the test ends.
func (h *harness) start(name string, cfg Config, pgURL, redisAddr string, setup func(string, *Service)) *instance {
	t := h.t
	t.Helper()
	cfg.Name = name
	cfg.Registry = prometheus.NewRegistry()
	db := openDB(t, pgURL)
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, MaxRetries: -1})
	ctx, cancel := context.WithCancel(context.Background())
	s, err := newService(ctx, cfg, db, rdb)
	if err != nil {
		cancel()
		rdb.Close()
		t.Fatalf("instance %s: %v", name, err)
	}
	if setup != nil {
		setup(name, s)
	}
	srv := httptest.NewServer(s.Handler())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })
	t.Cleanup(func() {
		srv.Close()
		cancel()
		wg.Wait()
		s.Close()
		rdb.Close()
	})
	return &instance{s: s, url: srv.URL}
}

func openDB(t *testing.T, pgURL string) *sql.DB {
	t.Helper()
	return testsvc.OpenDB(t, "pgx", pgURL, testsvc.MaxOpenConns(20))
}

// dropKeys deletes every Redis key under prefix.
func dropKeys(rdb *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
}

// client is the retrying client in front of both instances. Its attempts
// (at most 100 ms apart) outlast a slow machine: a copy answered 409 keeps
// retrying while the first copy waits its turn for the account's lock.
func (h *harness) client() *Client {
	return &Client{Servers: []string{h.a.url, h.b.url}, MaxBackoff: 100 * time.Millisecond, Attempts: 1200}
}

func (h *harness) createAccount(id string, balance int64) {
	h.t.Helper()
	body := fmt.Sprintf(`{"id":%q,"balance":%d}`, id, balance)
	resp, err := http.Post(h.a.url+"/accounts", "application/json", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		h.t.Fatalf("create account: %d %s", resp.StatusCode, b)
	}
}

// ledgerEntry is one ledger row, in commit order.
type ledgerEntry struct {
	OrderID      string
	Amount       int64
	BalanceAfter int64
}

func (h *harness) ledger(account string) []ledgerEntry {
	h.t.Helper()
	rows, err := h.db.Query(`SELECT order_id, amount, balance_after FROM ledger WHERE account = $1 ORDER BY balance_after DESC`, account)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var out []ledgerEntry
	for rows.Next() {
		var e ledgerEntry
		if err := rows.Scan(&e.OrderID, &e.Amount, &e.BalanceAfter); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}

func (h *harness) balance(account string) int64 {
	h.t.Helper()
	var b int64
	if err := h.db.QueryRow(`SELECT balance FROM accounts WHERE id = $1`, account).Scan(&b); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// checkLedger asserts that the account's ledger explains its balance exactly:
// the balance is the initial one minus the ledger's sum, and the rows form
// one chain, each deducting from the balance the previous one left (a lost
// update breaks the chain). It returns the ledger's sum.
func (h *harness) checkLedger(account string, initial int64) int64 {
	h.t.Helper()
	entries := h.ledger(account)
	seen := map[string]bool{}
	prev, sum := initial, int64(0)
	for _, e := range entries {
		if seen[e.OrderID] {
			h.t.Errorf("order %s appears twice in the ledger", e.OrderID)
		}
		seen[e.OrderID] = true
		if e.BalanceAfter != prev-e.Amount {
			h.t.Errorf("ledger chain broken at order %s: %d - %d != %d", e.OrderID, prev, e.Amount, e.BalanceAfter)
		}
		prev = e.BalanceAfter
		sum += e.Amount
	}
	if got := h.balance(account); got != initial-sum || got < 0 {
		h.t.Errorf("balance %d, want initial %d - ledger sum %d = %d", got, initial, sum, initial-sum)
	}
	return sum
}

// waitReceipts waits until the consumers have taken every event on the
// stream and settled it, then asserts that each account's receipts match its
// ledger exactly.
func (h *harness) waitReceipts(accounts ...string) {
	h.t.Helper()
	ctx := context.Background()
	stream := h.prefix + "events"
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := h.rdb.XLen(ctx, stream).Result()
		if err != nil {
			h.t.Fatal(err)
		}
		groups, _ := h.rdb.XInfoGroups(ctx, stream).Result()
		pending, _ := h.rdb.XPending(ctx, stream, receiptsGroup).Result()
		if len(groups) == 1 && groups[0].EntriesRead == n && pending != nil && pending.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("consumers did not settle the stream: %d entries, groups %+v, pending %+v", n, groups, pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, acc := range accounts {
		var count, total, ledgerCount, ledgerSum int64
		err := h.db.QueryRow(`SELECT coalesce((SELECT count FROM receipts WHERE account = $1), 0),
	coalesce((SELECT total FROM receipts WHERE account = $1), 0),
	(SELECT count(*) FROM ledger WHERE account = $1), (SELECT coalesce(sum(amount), 0) FROM ledger WHERE account = $1)`, acc).
			Scan(&count, &total, &ledgerCount, &ledgerSum)
		if err != nil {
			h.t.Fatal(err)
		}
		if count != ledgerCount || total != ledgerSum {
			h.t.Errorf("account %s: receipts %d totalling %d, ledger %d totalling %d", acc, count, total, ledgerCount, ledgerSum)
		}
	}
}

func (h *harness) stat(f func(*stats) int64) int64 { return f(&h.a.s.stats) + f(&h.b.s.stats) }

// checkChargedOnce checks that account, opened with initial, was charged
// amount exactly once, and that answer (a 201's body) is that payment.
func (h *harness) checkChargedOnce(account string, answer []byte, initial, amount int64) {
	h.t.Helper()
	p := decodePayment(h.t, answer)
	if p.Amount != amount || p.BalanceAfter != initial-amount || p.Status != statusPaid {
		h.t.Errorf("answer %+v", p)
	}
	if sum := h.checkLedger(account, initial); sum != amount {
		h.t.Errorf("ledger sum %d, want exactly one charge of %d", sum, amount)
	}
	if got := h.stat(func(s *stats) int64 { return s.paid.Load() }); got != 1 {
		h.t.Errorf("charged %d times, want 1", got)
	}
}

func decodePayment(t *testing.T, b []byte) payment {
	t.Helper()
	var p payment
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return p
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// metric returns the value of the sample name{labels} on the instances'
// /metrics pages, summed; labels are written as the exposition format sorts
// them, e.g. `handler="pay",outcome="executed"`.
func (h *harness) metric(name, labels string) float64 {
	h.t.Helper()
	var sum float64
	for _, in := range []*instance{h.a, h.b} {
		resp, err := http.Get(in.url + "/metrics")
		if err != nil {
			h.t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			h.t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
		}
		prefix := name + "{" + labels + "} "
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				var f float64
				if _, err := fmt.Sscan(v, &f); err != nil {
					h.t.Fatalf("metric line %q: %v", line, err)
				}
				sum += f
			}
		}
	}
	return sum
}
