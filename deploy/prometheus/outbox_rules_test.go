package prometheus_test

import (
	"context"
	"database/sql"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/latchkey-go/latchkey/deploy/prometheus"
	"github.com/latchkey-go/latchkey/internal/backendurl"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/metrics"
	"github.com/latchkey-go/latchkey/outbox"
)

// TestOutboxRules runs `promtool check rules` and `promtool test rules` on
// the outbox's rule file, and checks that each of its alerts has a test.
func TestOutboxRules(t *testing.T) {
	promtool := testsvc.Promtool(t)
	if out, err := exec.Command(promtool, "check", "rules", "outbox.rules.yml").CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err := exec.Command(promtool, "test", "rules", "outbox.rules.test.yml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	tests := read(t, "outbox.rules.test.yml")
	n := 0
	for _, line := range strings.Split(prometheus.OutboxRules, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: "); ok {
			n++
			if !strings.Contains(tests, "alertname: "+name+"\n") {
				t.Errorf("alert %s has no promtool test", name)
			}
		}
	}
	if n < 2 {
		t.Errorf("%d alerts found, want 2", n)
	}
}

// TestPrometheusFiresOutboxLag: a real Prometheus scrapes metrics.NewOutbox's
// gauges of a SQLite outbox every second and evaluates the shipped rules
// with their for: cut to 1 s. With a fresh pending message the lag alert
// stays silent; once the oldest message has waited past the threshold (its
// creation time moved an hour back), it goes pending or firing.
func TestPrometheusFiresOutboxLag(t *testing.T) {
	t.Parallel()
	db, ob := sqliteOutbox(t)
	if _, err := ob.Add(t.Context(), db, outbox.Message{Topic: "payments", Key: "acct-1"}); err != nil {
		t.Fatal(err)
	}
	reg := promclient.NewRegistry()
	c := metrics.NewOutbox()
	c.Add("payments", ob)
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	rules := regexp.MustCompile(`(?m)^(\s+)for: \S+$`).ReplaceAllString(prometheus.OutboxRules, "${1}for: 1s")
	config := `global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [outbox.rules.yml]
scrape_configs:
  - job_name: app
    static_configs: [{targets: ["` + strings.TrimPrefix(srv.URL, "http://") + `"]}]
`
	prom := testsvc.StartPrometheus(t, config, map[string]string{"outbox.rules.yml": rules})
	waitUntil(t, "the pending gauge in Prometheus", func() bool {
		return len(prom.Query(t, `latchkey_outbox_pending_messages{outbox="payments"} == 1`)) == 1
	})
	if s := prom.Alerts(t)["LatchkeyOutboxLagHigh"]; s != "" {
		t.Fatalf("lag alert %s with a fresh message", s)
	}
	if _, err := db.ExecContext(t.Context(), `UPDATE outbox_messages SET created_ms = created_ms - 3600000`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the lag alert", func() bool {
		s := prom.Alerts(t)["LatchkeyOutboxLagHigh"]
		return s == "pending" || s == "firing"
	})
}

func sqliteOutbox(t *testing.T) (*sql.DB, *outbox.Outbox) {
	t.Helper()
	db := testsvc.OpenDB(t, "sqlite", backendurl.SQLiteDSN(filepath.Join(t.TempDir(), "app.db")), testsvc.MaxOpenConns(0))
	ob, err := outbox.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, ob
}

// waitUntil polls cond for at most 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 150 {
		if cond() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no %s within 30 s", what)
}
