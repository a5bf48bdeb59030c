package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latchkey-go/latchkey/dedup"
	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/memstore"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/memlock"
	"github.com/latchkey-go/latchkey/metrics"
)

// Register the three collectors, plug their hooks into a Locker, an
// idempotency middleware and a Deduper, and serve them on /metrics.
func Example() {
	reg := prometheus.NewRegistry()
	locks, _ := metrics.NewLock()
	requests, _ := metrics.NewIdem()
	messages, _ := metrics.NewDedup()
	reg.MustRegister(locks, requests, messages)

	locker := memlock.New() // redislock, etcdlock, ...: every Locker has SetObserver
	locker.SetObserver(locks.Observer("mem"))
	store := memstore.New()
	pay := idemhttp.Middleware(store, idemhttp.WithObserver(requests.Observer("pay")))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	d, _ := dedup.New(dedup.FromIdem(memstore.New()), dedup.WithObserver(messages.Observer("orders")))
	charge := idem.WithObserver(requests.DoObserver("charge")) // idem.Do calls

	ctx := context.Background()
	_ = lock.Do(ctx, locker, "account-1", func(ctx context.Context, _ *lock.Lease) error { return nil })
	for range 2 { // a retried payment: executed once, replayed once
		r := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(`{"amount":100}`))
		r.Header.Set("Idempotency-Key", "a1b2c3")
		pay.ServeHTTP(httptest.NewRecorder(), r)
	}
	for range 2 { // a retried charge through idem.Do: executed once, replayed once
		_, _ = idem.Do(ctx, store, "order-7", func(context.Context) (string, error) { return "ch_1", nil }, charge)
	}
	for range 2 { // a redelivered message: processed once, dropped once
		_, _ = d.Process(ctx, dedup.Message{ID: "msg-1"}, func(context.Context, dedup.Message) error { return nil })
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range []string{"latchkey_lock_leases_held", "latchkey_lock_releases_total", "latchkey_idem_requests_total", "latchkey_dedup_messages_total"} {
			if strings.HasPrefix(line, name+"{") && !strings.HasSuffix(line, " 0") {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// latchkey_dedup_messages_total{consumer="orders",outcome="duplicate"} 1
	// latchkey_dedup_messages_total{consumer="orders",outcome="processed"} 1
	// latchkey_idem_requests_total{handler="charge",outcome="executed"} 1
	// latchkey_idem_requests_total{handler="charge",outcome="replayed"} 1
	// latchkey_idem_requests_total{handler="pay",outcome="executed"} 1
	// latchkey_idem_requests_total{handler="pay",outcome="replayed"} 1
	// latchkey_lock_releases_total{backend="mem",result="ok"} 1
}
