package testsvc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// Query runs an instant query through the server's HTTP API and returns
// the result's samples as their label sets, each with its value under
// "__value__".
func (s *PrometheusServer) Query(t testing.TB, q string) []map[string]string {
	t.Helper()
	var out struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	getJSON(t, s.URL()+"/api/v1/query?query="+url.QueryEscape(q), &out)
	var rows []map[string]string
	for _, r := range out.Data.Result {
		m := r.Metric
		m["__value__"] = fmt.Sprint(r.Value[1])
		rows = append(rows, m)
	}
	return rows
}

// Alerts returns the state (pending or firing) of each active alert, by
// its name; an alert that is not active is not in the map.
func (s *PrometheusServer) Alerts(t testing.TB) map[string]string {
	t.Helper()
	var out struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	getJSON(t, s.URL()+"/api/v1/alerts", &out)
	states := map[string]string{}
	for _, a := range out.Data.Alerts {
		states[a.Labels["alertname"]] = a.State
	}
	return states
}

func getJSON(t testing.TB, u string, into any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}
