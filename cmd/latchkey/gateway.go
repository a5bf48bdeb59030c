package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/idemurl"
	"github.com/latchkey-go/latchkey/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Gateway defaults.
const (
	gatewayListen = "127.0.0.1:8080"
	gatewayGrace  = 30 * time.Second
	// adminPrefix starts the gateway's own endpoints; requests under it are
	// never proxied or guarded.
	adminPrefix = "/_latchkey/"
	// readyTimeout bounds each readiness check.
	readyTimeout = 2 * time.Second
)

const gatewayUsage = `usage: latchkey gateway --upstream URL [flags]

An idempotency reverse proxy in front of any HTTP service: requests that carry
an Idempotency-Key run once upstream; copies get the first response again
(Idempotent-Replayed: true), 409 while the first still runs, 422 when the key
was used for a different request. Several gateways sharing a Redis or
PostgreSQL store act as one. Semantics are those of the idemhttp middleware.

With no --config, every POST and PATCH that carries a key is guarded and
requests without one pass through. A config file (JSON, every field optional,
durations as "30s") sets defaults and per-route rules:

  {"listen": "127.0.0.1:8080", "upstream": "http://127.0.0.1:9000",
   "store": "redis://127.0.0.1:6379/0?prefix=gw:", "grace": "30s",
   "ready_upstream": true, "in_progress": "1m", "retention": "24h", "wait": "0s",
   "max_request_body": 1048576, "max_response_body": 1048576,
   "rules": [{"methods": ["POST"], "path": "/payments/", "key": "required",
              "header": "Idempotency-Key", "body_key": "", "principal_header": "",
              "in_progress": "30s", "retention": "24h", "wait": "0s",
              "max_request_body": 65536, "max_response_body": 65536}]}

Rules are tried in order and the first whose methods (default POST, PATCH)
and path (a net/http ServeMux pattern: "/payments/" is a subtree,
"/orders/{id}/pay" has a wildcard) match applies. key: "required" (400
without one, the default), "optional" (pass through without one) or "off".
The key comes from header (default Idempotency-Key) or from body_key, a
top-level string of a JSON body. Keys are scoped by principal_header's value,
default the Authorization header. Requests no rule matches pass through.
max_request_body caps a guarded request's body in bytes (it is read whole to
fingerprint it; larger: 413) and max_response_body the response kept for
replay (larger: the first client gets it, copies get 500, never a second
run); both default to 1 MiB. Flags given on the command line win over the
file.

Endpoints of the gateway itself, never proxied:
  /_latchkey/healthz   200 while the process runs
  /_latchkey/readyz    200 when the store answers (and the upstream accepts
                       connections, with --ready-upstream); 503 otherwise and
                       while shutting down
  /_latchkey/metrics   Prometheus metrics: latchkey_idem_* by rule and
                       outcome (executed, replayed, conflict, mismatch, ...),
                       and the Go runtime's and process's

SIGTERM or SIGINT: stop accepting, let requests in flight finish for --grace
(a second signal ends the wait).
A request still running after that keeps its key claimed until its in-progress
deadline; then any gateway sharing the store runs a retry.

Exit status: 0 after a shutdown; 2 for usage errors (nothing started); 69 if
the store cannot be opened or the address cannot be bound.

Flags:
`

// defaultGatewayStore is an SQLite file in the user's cache directory, or
// in the working directory when there is none.
func defaultGatewayStore() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "sqlite:latchkey-gateway.db"
	}
	return "sqlite://" + filepath.ToSlash(filepath.Join(dir, "latchkey", "gateway.db"))
}

func gatewayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), gatewayUsage); fs.PrintDefaults() }
	listen := fs.String("listen", gatewayListen, "address to serve on, host:port (port 0: any free port)")
	upstream := fs.String("upstream", "", "base URL of the service behind the gateway, http:// or https:// (required)")
	store := fs.String("store", defaultGatewayStore(),
		"idempotency store URL: sqlite:///path, postgres://..., redis://host:port[?prefix=P], redis-cluster://..., mem://")
	config := fs.String("config", "", "JSON file with rules and defaults (see above); flags win over it")
	inProgress := fs.Duration("in-progress", idem.DefaultInProgress,
		"in-progress deadline: a claim whose request has not finished by then is taken over; the upstream call is cancelled at it")
	retention := fs.Duration("retention", idem.DefaultRetention, "how long responses are replayed")
	wait := fs.Duration("wait", 0, "a copy arriving while the first runs waits up to this long and replays it; 0 answers 409")
	grace := fs.Duration("grace", gatewayGrace, "on SIGTERM, how long requests in flight may finish")
	readyUpstream := fs.Bool("ready-upstream", false, "readyz also checks that the upstream accepts connections")
	maxRequest := fs.Int64("max-request-body", idemhttp.DefaultMaxRequestBody,
		"bytes: a guarded request's body is read whole to fingerprint it; a larger one gets 413")
	maxResponse := fs.Int64("max-response-body", idemhttp.DefaultMaxResponseBody,
		"bytes: the response kept for replay; a larger one reaches its client, and copies get 500 response-not-retained, never a second run")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "latchkey gateway: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "latchkey gateway: %v\n", err)
		return exitUsage
	}

	cfg := &gatewayConfig{}
	if *config != "" {
		c, err := loadGatewayConfig(*config)
		if err != nil {
			return usageErr(err)
		}
		cfg = c
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pick := func(flagName string, fromFlag, fromFile string) string {
		if set[flagName] || fromFile == "" {
			return fromFlag
		}
		return fromFile
	}
	pickDur := func(flagName string, fromFlag time.Duration, fromFile duration) time.Duration {
		if set[flagName] || !fromFile.set {
			return fromFlag
		}
		return fromFile.d
	}
	addr := pick("listen", *listen, cfg.Listen)
	storeURL := pick("store", *store, cfg.Store)
	target, err := checkUpstream(pick("upstream", *upstream, cfg.Upstream))
	if err != nil {
		return usageErr(err)
	}
	pickInt := func(flagName string, fromFlag int64, fromFile *int64) int64 {
		if set[flagName] || fromFile == nil {
			return fromFlag
		}
		return *fromFile
	}
	d := ruleDefaults{
		inProgress:      pickDur("in-progress", *inProgress, cfg.InProgress),
		retention:       pickDur("retention", *retention, cfg.Retention),
		wait:            pickDur("wait", *wait, cfg.Wait),
		maxRequestBody:  pickInt("max-request-body", *maxRequest, cfg.MaxRequestBody),
		maxResponseBody: pickInt("max-response-body", *maxResponse, cfg.MaxResponseBody),
	}
	if err := checkBodyCap("--max-request-body (max_request_body)", d.maxRequestBody); err != nil {
		return usageErr(err)
	}
	if err := checkBodyCap("--max-response-body (max_response_body)", d.maxResponseBody); err != nil {
		return usageErr(err)
	}
	g := pickDur("grace", *grace, cfg.Grace)
	if g < 0 {
		return usageErr(errors.New("--grace must not be negative"))
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	onError := func(r *http.Request, err error) {
		log.ErrorContext(r.Context(), "idempotency store", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	var rules []*rule
	if len(cfg.Rules) == 0 {
		r, err := buildRule("default rule", defaultRule(), d, onError)
		if err != nil { // only the flags can be wrong
			return usageErr(fmt.Errorf("flags: %w", err))
		}
		rules = append(rules, r)
	}
	for i, rc := range cfg.Rules {
		r, err := buildRule(fmt.Sprintf("rules[%d]", i), rc, d, onError)
		if err != nil {
			return usageErr(err)
		}
		rules = append(rules, r)
	}
	if storeURL == defaultGatewayStore() {
		// The default file's directory may not exist yet; a path the user
		// gave must.
		if u, err := url.Parse(storeURL); err == nil && u.Path != "" {
			_ = os.MkdirAll(filepath.Dir(filepath.FromSlash(u.Path)), 0o755)
		}
	}
	// A bad store URL wraps idem.ErrInvalid: a usage error, found before
	// anything is started.
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	st, err := idemurl.Open(octx, storeURL)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "latchkey gateway: %v\n", err)
		if errors.Is(err, idem.ErrInvalid) {
			return exitUsage
		}
		return exitUnavailable
	}
	defer st.Close()

	gw := newGateway(st, target, rules, log, *readyUpstream || cfg.ReadyUpstream)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "latchkey gateway: %v\n", err)
		return exitUnavailable
	}
	srv := &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("latchkey gateway listening", "addr", ln.Addr().String(), "upstream", target.Redacted(),
		"store", idemurl.Redact(storeURL), "rules", len(rules))

	select {
	case err := <-served:
		fmt.Fprintf(stderr, "latchkey gateway: %v\n", err)
		return exitUnavailable
	case <-ctx.Done():
	}
	return gw.shutdown(srv, g)
}

// shutdown stops accepting, waits up to grace for requests in flight, and
// returns the exit status. Requests still running after grace are left as
// they are: the process exits, and their claims end at their in-progress
// deadlines, after which any gateway sharing the store runs a retry.
// Releasing them instead could run a payment twice: the upstream may be
// finishing it.
func (g *gateway) shutdown(srv *http.Server, grace time.Duration) int {
	// A second SIGTERM or SIGINT cuts the grace period short.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	g.draining.Store(true)
	g.log.Info("shutting down", "in_flight", g.inFlight.Load(), "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(sctx) }()
	var err error
	select {
	case err = <-done:
	case <-again:
		cancel()
		err = <-done
	}
	if err != nil {
		g.log.Warn("grace period over; requests still in flight keep their keys claimed until their in-progress deadlines",
			"in_flight", g.inFlight.Load(), "max_in_progress", g.maxInProgress)
		return exitOK
	}
	g.log.Info("stopped", "in_flight", g.inFlight.Load())
	return exitOK
}

// gateway is the handler: admin endpoints, then the first matching rule's
// middleware in front of the reverse proxy.
type gateway struct {
	store         idemurl.Store
	target        *url.URL
	proxy         http.Handler
	rules         []*rule
	handlers      []http.Handler // one per rule
	log           *slog.Logger
	readyUpstream bool
	metrics       http.Handler // Prometheus exposition of the gateway's registry
	draining      atomic.Bool
	inFlight      atomic.Int64
	maxInProgress time.Duration
}

func newGateway(st idemurl.Store, target *url.URL, rules []*rule, log *slog.Logger, readyUpstream bool) *gateway {
	g := &gateway{store: st, target: target, rules: rules, log: log, readyUpstream: readyUpstream}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		ErrorHandler: g.upstreamError,
	}
	reg := prometheus.NewRegistry()
	idm, _ := metrics.NewIdem() // fails only on a bad option; none given
	reg.MustRegister(idm, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	g.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	for _, r := range rules {
		h := g.proxy
		if r.key != "off" {
			// The options were checked when the rule was built. Each
			// rule counts under its own handler label.
			opts := append(slices.Clip(r.opts), idemhttp.WithObserver(idm.Observer(r.desc)))
			h = idemhttp.Middleware(st, opts...)(detach(g.proxy))
		}
		g.handlers = append(g.handlers, h)
	}
	for _, r := range rules {
		g.maxInProgress = max(g.maxInProgress, r.inProgress)
	}
	return g
}

// detach runs a guarded request upstream under a context that ends at the
// in-progress deadline but not when the client hangs up: the upstream
// finishes the operation, its answer is recorded, and the client's retry
// gets the replay instead of a second run.
func detach(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithoutCancel(r.Context())
		if dl, ok := r.Context().Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// reqInfo is what the log line of a request reports; the key rules fill in.
type reqInfo struct{ key bool }

type reqInfoKey struct{}

// noteKey wraps a key function to note, for the log, whether the request
// carried a key. The key itself is never logged.
func noteKey(f idemhttp.KeyFunc) idemhttp.KeyFunc {
	return func(r *http.Request, body []byte) (string, error) {
		k, err := f(r, body)
		if info, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok && (k != "" || err != nil) {
			info.key = true
		}
		return k, err
	}
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, adminPrefix) {
		g.admin(w, r)
		return
	}
	g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	start := time.Now()
	info := &reqInfo{}
	r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, info))
	h, desc := g.proxy, "none"
	for i, rl := range g.rules {
		if rl.matches(r) {
			h, desc = g.handlers[i], rl.desc
			break
		}
	}
	sw := &statusWriter{ResponseWriter: w}
	h.ServeHTTP(sw, r)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	g.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
		"ms", time.Since(start).Milliseconds(), "rule", desc, "key", info.key,
		"replayed", sw.Header().Get("Idempotent-Replayed") == "true")
}

func (g *gateway) admin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeGatewayProblem(w, http.StatusMethodNotAllowed, "method-not-allowed", "the gateway's endpoints answer GET")
		return
	}
	switch strings.TrimPrefix(r.URL.Path, adminPrefix) {
	case "healthz":
		writeStatus(w, http.StatusOK, "ok")
	case "metrics":
		g.metrics.ServeHTTP(w, r)
	case "readyz":
		if g.draining.Load() {
			writeStatus(w, http.StatusServiceUnavailable, "shutting down")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := g.store.Ping(ctx); err != nil {
			g.log.Warn("readyz: store", "err", err)
			writeStatus(w, http.StatusServiceUnavailable, "store unreachable")
			return
		}
		if g.readyUpstream {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", upstreamAddr(g.target))
			if err != nil {
				g.log.Warn("readyz: upstream", "err", err)
				writeStatus(w, http.StatusServiceUnavailable, "upstream unreachable")
				return
			}
			_ = c.Close()
		}
		writeStatus(w, http.StatusOK, "ready")
	default:
		writeGatewayProblem(w, http.StatusNotFound, "not-found", "the gateway's endpoints are "+adminPrefix+"healthz, "+adminPrefix+"readyz and "+adminPrefix+"metrics")
	}
}

func upstreamAddr(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// upstreamError answers a request the upstream did not answer: 504 when the
// in-progress deadline cut the call, 502 otherwise. Both are 5xx, so the
// middleware does not record them and a retry runs. It answers even a client
// that went away: an empty answer would count as a 200.
func (g *gateway) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	g.log.Warn("upstream", "method", r.Method, "path", r.URL.Path, "err", err)
	if errors.Is(err, context.DeadlineExceeded) {
		writeGatewayProblem(w, http.StatusGatewayTimeout, "upstream-timeout",
			"the upstream did not answer before the in-progress deadline; a retry may run the request again")
		return
	}
	writeGatewayProblem(w, http.StatusBadGateway, "upstream-unavailable",
		"the upstream could not be reached or gave no answer; a retry may run the request again")
}

// writeGatewayProblem writes an application/problem+json answer (RFC 9457)
// with the members the middleware's answers have, so clients read both alike.
func writeGatewayProblem(w http.ResponseWriter, status int, code, detail string) {
	p := struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
		Code   string `json:"code"`
	}{"about:blank", http.StatusText(status), status, detail, code}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeStatus(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text+"\n")
}

// statusWriter notes the status for the log line.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
