package testsvc

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// PrometheusServer is a prometheus child process owned by one test, which
// scrapes what the test serves and evaluates the test's rules. Its data
// directory lives in t.TempDir(). Pid, Stop, Start, Restart and Signal are
// safe for concurrent use; Start and Restart report failures with t.Fatalf.
type PrometheusServer struct {
	*process
	port int
}

// prometheusStartTimeout bounds how long Start waits for /-/ready.
const prometheusStartTimeout = 30 * time.Second

// StartPrometheus starts a private prometheus (Debian's prometheus:
// `prometheus` on PATH) on a free port of 127.0.0.1, with config as its
// prometheus.yml and each of files (name: content) beside it, so the
// config's rule_files can name them; its data directory is in t.TempDir().
// args follow the server's own flags. It waits until /-/ready answers and
// stops the server in t.Cleanup. It calls Unavailable when prometheus is not
// on PATH (apt-get install prometheus). The log is prometheus.log in the
// server's directory and is shown when it fails to start.
func StartPrometheus(t testing.TB, config string, files map[string]string, args ...string) *PrometheusServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		Unavailable(t, "testsvc: prometheus not found on PATH (apt-get install prometheus)")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &PrometheusServer{}
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	s.process = &process{
		t: t, name: "prometheus", dir: dir, log: filepath.Join(dir, "prometheus.log"),
		timeout: prometheusStartTimeout,
		command: func() *exec.Cmd {
			argv := []string{
				"--config.file", filepath.Join(dir, "prometheus.yml"),
				"--storage.tsdb.path", filepath.Join(dir, "data"),
				"--web.listen-address", s.Addr(),
				"--log.level", "warn",
			}
			return exec.Command(bin, append(argv, args...)...)
		},
		ready: func() bool { return answersOK(hc, s.URL()+"/-/ready") },
	}
	s.startOnFreePorts(5, nil, &s.port)
	return s
}

// answersOK reports whether a GET of url answers 200 OK: the readiness
// check of a server with an HTTP API.
func answersOK(hc *http.Client, url string) bool {
	resp, err := hc.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Addr returns the server's address, 127.0.0.1:PORT.
func (s *PrometheusServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns the server's base URL, http://127.0.0.1:PORT, for its HTTP
// API (/api/v1/query, /api/v1/alerts).
func (s *PrometheusServer) URL() string { return "http://" + s.Addr() }

// Promtool returns the path of promtool (Debian's prometheus package), and
// calls Unavailable when it is not on PATH.
func Promtool(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		Unavailable(t, "testsvc: promtool not found on PATH (apt-get install prometheus)")
	}
	return bin
}
