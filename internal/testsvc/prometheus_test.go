package testsvc

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPrometheusServer starts a Prometheus with a rule file beside its
// config, checks that it loaded the rule (its own API says so), and that it
// comes back on the same address after a restart.
func TestPrometheusServer(t *testing.T) {
	config := "global: {evaluation_interval: 1s}\nrule_files: [r.yml]\n"
	rules := "groups:\n  - name: t\n    rules:\n      - record: testsvc:up\n        expr: vector(1)\n"
	s := StartPrometheus(t, config, map[string]string{"r.yml": rules})
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", s.URL())
	}
	ruleNames := func() string {
		resp, err := http.Get(s.URL() + "/api/v1/rules")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name string `json:"name"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, g := range out.Data.Groups {
			for _, r := range g.Rules {
				names = append(names, r.Name)
			}
		}
		return strings.Join(names, ",")
	}
	if got := ruleNames(); got != "testsvc:up" {
		t.Fatalf("rules loaded: %q", got)
	}
	pid := s.Pid()
	s.Restart()
	if s.Pid() == pid || s.Pid() == 0 {
		t.Fatalf("Restart: pid %d, was %d", s.Pid(), pid)
	}
	if got := ruleNames(); got != "testsvc:up" {
		t.Fatalf("rules after restart: %q", got)
	}
	s.Stop()
	if s.Pid() != 0 {
		t.Fatal("server still running after Stop")
	}
	c := &http.Client{Timeout: time.Second}
	if _, err := c.Get(s.URL() + "/-/ready"); err == nil {
		t.Fatal("a stopped server answers")
	}
}
