package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkey-go/latchkey/deploy/prometheus"
	"github.com/latchkey-go/latchkey/idem/idemhttp/idemhttptest"
	"github.com/latchkey-go/latchkey/internal/testsvc"
)

// TestPrometheusScrapesGatewayDuringOutage runs a real Prometheus that
// scrapes a gateway (its store a private Redis) every second and evaluates
// a copy of the shipped rules whose `for:` is 1 s. A storm of duplicate
// payments makes the replay and conflict series; stopping the Redis makes
// the store-error series, and the store-error alert must go pending or
// firing, as seen through Prometheus's HTTP API.
func TestPrometheusScrapesGatewayDuringOutage(t *testing.T) {
	t.Parallel()
	rdb := testsvc.StartRedis(t)
	up := idemhttptest.NewUpstream()
	srv := upstreamServer(t, up)
	cache := t.TempDir()
	g := startGateway(t, []string{"XDG_CACHE_HOME=" + cache, "HOME=" + cache},
		"--upstream", srv.URL, "--store", "redis://"+rdb.Addr()+"/0?dial_timeout=300ms")
	target := strings.TrimPrefix(g.url, "http://")

	rules := regexp.MustCompile(`(?m)^(\s+)for: \S+$`).ReplaceAllString(prometheus.Rules, "${1}for: 1s")
	if rules == prometheus.Rules {
		t.Fatal("no for: in the shipped rules to shorten")
	}
	config := `global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [latchkey.rules.yml]
scrape_configs:
  - job_name: gateway
    metrics_path: /_latchkey/metrics
    static_configs: [{targets: ["` + target + `"]}]
`
	prom := testsvc.StartPrometheus(t, config, map[string]string{"latchkey.rules.yml": rules})

	// A storm of duplicates: 8 clients send the same 20 payments.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 20 {
				send(t, "POST", g.url+"/payments", fmt.Sprintf("storm-%d", i))
			}
		})
	}
	wg.Wait()
	waitFor(t, 20*time.Second, "the replays in Prometheus", func() bool {
		rows := prom.Query(t, `latchkey_idem_requests_total{job="gateway",outcome="replayed"} > 0`)
		return len(rows) == 1
	})
	for _, q := range []string{
		`latchkey_idem_requests_total{outcome="executed"}`,
		`latchkey_idem_request_duration_seconds_bucket{outcome="replayed"}`,
		`latchkey_idem_replay_age_seconds_count`,
		`latchkey_gateway_upstream_errors_total{reason="unavailable"}`,
	} {
		if rows := prom.Query(t, q); len(rows) == 0 {
			t.Errorf("no series for %s", q)
		}
	}
	if states := prom.Alerts(t); states["LatchkeyIdemStoreErrors"] != "" {
		t.Fatalf("store-error alert %s before any store error", states["LatchkeyIdemStoreErrors"])
	}

	// The outage: every claim fails, answered 503.
	rdb.Stop()
	stop := make(chan struct{})
	var outage sync.WaitGroup
	outage.Go(func() { sendDuringOutage(t, g, stop) })
	defer func() { close(stop); outage.Wait() }()
	waitFor(t, 30*time.Second, "the store-error alert", func() bool {
		s := prom.Alerts(t)["LatchkeyIdemStoreErrors"]
		return s == "pending" || s == "firing"
	})
	rows := prom.Query(t, `latchkey:idem_store_errors:rate5m{operation="claim"}`)
	if len(rows) != 1 || rows[0]["handler"] == "" {
		t.Errorf("recorded store-error rate: %v", rows)
	}
	// No key reaches a label.
	for _, row := range prom.Query(t, `{job="gateway",__name__=~"latchkey_.*"}`) {
		for k, v := range row {
			if strings.Contains(v, "storm-") || strings.Contains(v, "outage-") {
				t.Errorf("label %s=%q holds a key", k, v)
			}
		}
	}
}

// sendDuringOutage sends payments to g, each with a key of its own, every
// 50 ms until stop closes; each must be answered 503.
func sendDuringOutage(t *testing.T, g *gatewayProc, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		if a := send(t, "POST", g.url+"/payments", fmt.Sprintf("outage-%d", i)); a.status != http.StatusServiceUnavailable {
			t.Errorf("payment during the outage: %d, want 503", a.status)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
