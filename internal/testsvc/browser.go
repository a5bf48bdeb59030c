package testsvc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A Browser is a headless Chromium (Debian's chromium) driven over the
// WebDriver protocol by its chromedriver, both children of the test, on
// loopback. It loads pages, runs scripts in them and takes screenshots.
type Browser struct {
	*process
	t       testing.TB
	port    int
	session string
	hc      *http.Client
}

// browserStartTimeout bounds how long StartBrowser waits for chromedriver
// and for a browser session.
const browserStartTimeout = 60 * time.Second

// chromiumArgs keep the browser to the page it is given: no GPU, no
// sandbox (tests run as root), nothing fetched in the background.
var chromiumArgs = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
	"--disable-background-networking", "--disable-component-update", "--disable-default-apps",
	"--disable-extensions", "--disable-sync", "--no-first-run", "--no-default-browser-check",
	"--metrics-recording-only", "--hide-scrollbars", "--window-size=1300,1000",
}

// StartBrowser starts chromedriver on a free port of 127.0.0.1 and one
// headless Chromium session, both ended in t.Cleanup. It calls Unavailable
// when chromium or chromedriver is not on PATH (apt-get install chromium
// chromium-driver; scripts/services.sh does).
func StartBrowser(t testing.TB) *Browser {
	t.Helper()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		Unavailable(t, "testsvc: chromedriver not found on PATH (apt-get install chromium-driver)")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		Unavailable(t, "testsvc: chromium not found on PATH (apt-get install chromium)")
	}
	dir := t.TempDir()
	b := &Browser{t: t, hc: &http.Client{Timeout: browserStartTimeout}}
	ping := &http.Client{Timeout: 500 * time.Millisecond}
	b.process = &process{
		t: t, name: "chromedriver", dir: dir, log: filepath.Join(dir, "chromedriver.log"),
		timeout: browserStartTimeout,
		command: func() *exec.Cmd {
			return exec.Command(driver, "--port="+strconv.Itoa(b.port), "--allowed-ips=127.0.0.1")
		},
		ready: func() bool { return answersOK(ping, b.url("/status")) },
	}
	b.startOnFreePorts(3, nil, &b.port)
	// Run before the cleanup that stops chromedriver.
	t.Cleanup(func() {
		if b.session != "" {
			_ = b.call(http.MethodDelete, "", nil, nil)
		}
	})
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{
			"binary": chromium,
			"args":   append(chromiumArgs, "--user-data-dir="+filepath.Join(dir, "profile")),
		},
	}}}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(http.MethodPost, "/session", caps, &created); err != nil {
		t.Fatalf("testsvc: start a Chromium session: %v; chromedriver's log:\n%s", err, tail(b.log, 2000))
	}
	b.session = created.SessionID
	return b
}

// Open loads url and waits until the page has loaded.
func (b *Browser) Open(url string) {
	b.t.Helper()
	if err := b.call(http.MethodPost, "/url", map[string]any{"url": url}, nil); err != nil {
		b.t.Fatalf("testsvc: open %s: %v", url, err)
	}
}

// Eval runs script in the page as the body of a function, with args as its
// arguments, and decodes what it returns into out.
func (b *Browser) Eval(out any, script string, args ...any) {
	b.t.Helper()
	if args == nil {
		args = []any{}
	}
	if err := b.call(http.MethodPost, "/execute/sync", map[string]any{"script": script, "args": args}, out); err != nil {
		b.t.Fatalf("testsvc: run a script in the page: %v\n%s", err, script)
	}
}

// Resize sets the window's size in CSS pixels, for a screenshot of the
// whole page.
func (b *Browser) Resize(width, height int) {
	b.t.Helper()
	if err := b.call(http.MethodPost, "/window/rect", map[string]any{"width": width, "height": height}, nil); err != nil {
		b.t.Fatalf("testsvc: resize the window: %v", err)
	}
}

// Screenshot writes a PNG of the window to path.
func (b *Browser) Screenshot(path string) {
	b.t.Helper()
	var encoded string
	if err := b.call(http.MethodGet, "/screenshot", nil, &encoded); err != nil {
		b.t.Fatalf("testsvc: take a screenshot: %v", err)
	}
	png, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		b.t.Fatalf("testsvc: the screenshot is not base64: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *Browser) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(b.port) + path
}

// call sends one WebDriver command: to the session's path, or to path
// itself before there is a session. It decodes the answer's value into out.
func (b *Browser) call(method, path string, in, out any) error {
	if b.session != "" {
		path = "/session/" + b.session + path
	}
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.url(path), body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var answer struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return fmt.Errorf("%s %s: %s, and the answer does not decode: %w", method, path, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, answer.Value)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer.Value, out)
}
