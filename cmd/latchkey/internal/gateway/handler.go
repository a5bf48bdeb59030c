package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/idemurl"
	"github.com/latchkey-go/latchkey/latchkeyotel"
	"github.com/latchkey-go/latchkey/metrics"
)

const (
	// adminPrefix starts the gateway's own endpoints; requests under it are
	// never proxied or guarded.
	adminPrefix = "/_latchkey/"
	// readyTimeout bounds each readiness check.
	readyTimeout = 2 * time.Second
)

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
	upstreamErrs  *prometheus.CounterVec
	draining      atomic.Bool
	inFlight      atomic.Int64
	maxInProgress time.Duration
}

// newGateway builds the handler. tel is nil when tracing is off; otherwise
// the upstream calls are client spans that carry traceparent upstream, and
// each guarded request's outcome is a span (a replay an event on the
// request's span).
func newGateway(st idemurl.Store, target *url.URL, rules []*rule, log *slog.Logger, readyUpstream bool, tel *latchkeyotel.Telemetry) *gateway {
	g := &gateway{store: st, target: target, rules: rules, log: log, readyUpstream: readyUpstream}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		ErrorHandler: g.upstreamError,
	}
	if tel != nil {
		proxy.Transport = otelhttp.NewTransport(http.DefaultTransport)
	}
	g.proxy = proxy
	reg := prometheus.NewRegistry()
	idm, _ := metrics.NewIdem() // fails only on a bad option; none given
	g.upstreamErrs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: "gateway", Name: "upstream_errors_total",
		Help: "Requests the upstream did not answer, by reason: timeout (504, the in-progress deadline cut the call) or unavailable (502).",
	}, []string{"reason"})
	for _, reason := range []string{"timeout", "unavailable"} {
		g.upstreamErrs.WithLabelValues(reason) // exported at 0 from the start, so rate() sees the first error
	}
	reg.MustRegister(idm, g.upstreamErrs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	g.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	for _, r := range rules {
		h := g.proxy
		if r.key != "off" {
			// The options were checked when the rule was built. Each
			// rule counts under its own handler label.
			observe := idm.Observer(r.desc)
			if tel != nil {
				count, trace := observe, tel.HTTPObserver(r.desc)
				observe = func(req *http.Request, e idemhttp.Event) { count(req, e); trace(req, e) }
			}
			opts := append(slices.Clip(r.opts), idemhttp.WithObserver(observe))
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
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", sw.status,
		"ms", time.Since(start).Milliseconds(), "rule", desc, "key", info.key,
		"replayed", sw.Header().Get("Idempotent-Replayed") == "true"}
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
		attrs = append(attrs, "trace_id", sc.TraceID().String()) // the log line finds its trace
	}
	g.log.Info("request", attrs...)
}

func (g *gateway) admin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, http.StatusMethodNotAllowed, "method-not-allowed", "the gateway's endpoints answer GET")
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
		writeProblem(w, http.StatusNotFound, "not-found", "the gateway's endpoints are "+adminPrefix+"healthz, "+adminPrefix+"readyz and "+adminPrefix+"metrics")
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
		g.upstreamErrs.WithLabelValues("timeout").Inc()
		writeProblem(w, http.StatusGatewayTimeout, "upstream-timeout",
			"the upstream did not answer before the in-progress deadline; a retry may run the request again")
		return
	}
	g.upstreamErrs.WithLabelValues("unavailable").Inc()
	writeProblem(w, http.StatusBadGateway, "upstream-unavailable",
		"the upstream could not be reached or gave no answer; a retry may run the request again")
}

// writeProblem writes an application/problem+json answer (RFC 9457)
// with the members the middleware's answers have, so clients read both alike.
func writeProblem(w http.ResponseWriter, status int, code, detail string) {
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
