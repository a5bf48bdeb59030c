// Package gateway is "latchkey gateway": an idempotency reverse proxy in
// front of any HTTP service. Its configuration comes from a file and the
// command line's flags, the flags winning (Flags, CommandLine.Config); Serve
// runs it until its context ends.
package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/latchkey-go/latchkey/idem/idemurl"
	"github.com/latchkey-go/latchkey/internal/otlpenv"
	"github.com/latchkey-go/latchkey/latchkeyotel"
)

// usage is the gateway's help; the flags follow it.
const usage = `usage: latchkey gateway --upstream URL [flags]

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
                       latchkey_gateway_upstream_errors_total, and the Go
                       runtime's and process's

Traces: with OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) set, each
proxied request is a span (continuing the caller's traceparent) exported over
OTLP (OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf, the default, or grpc); the
upstream call is a child span whose traceparent goes upstream, a replay is
an event on the request's span, and the request's log line names its
trace_id. No key, principal or body is an attribute.

SIGTERM or SIGINT: stop accepting, let requests in flight finish for --grace
(a second signal ends the wait).
A request still running after that keeps its key claimed until its in-progress
deadline; then any gateway sharing the store runs a retry.

Exit status: 0 after a shutdown; 2 for usage errors (nothing started); 69 if
the store cannot be opened or the address cannot be bound.

Flags:
`

// Serve opens the store, listens and proxies until ctx is done, then shuts
// down (see shutdown) and returns nil. Log lines go to stderr. Nothing is
// started when it fails: an error wrapping idem.ErrInvalid is a store URL
// that is wrong, one wrapping otlpenv.ErrInvalid an OTEL_* setting that is;
// any other error, a store that cannot be opened, an exporter that cannot be
// set up, or an address that cannot be bound.
func Serve(ctx context.Context, c *Config, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	onError := func(r *http.Request, err error) {
		log.ErrorContext(r.Context(), "idempotency store", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	rules := make([]*rule, len(c.rules))
	for i, s := range c.rules {
		rules[i] = s.build(onError)
	}
	if c.Store == DefaultStore() {
		// The default file's directory may not exist yet; a path the user
		// gave must.
		if u, err := url.Parse(c.Store); err == nil && u.Path != "" {
			_ = os.MkdirAll(filepath.Dir(filepath.FromSlash(u.Path)), 0o755)
		}
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	st, err := idemurl.Open(octx, c.Store)
	cancel()
	if err != nil {
		return err
	}
	defer st.Close()

	tr, err := otlpenv.Start(ctx, "latchkey-gateway")
	if err != nil {
		return err
	}
	var (
		tel     *latchkeyotel.Telemetry
		handler http.Handler
	)
	if tr != nil {
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tr.Shutdown(sctx); err != nil {
				log.Warn("exporting the last spans", "err", err)
			}
		}()
		if tel, err = latchkeyotel.New(latchkeyotel.WithTracerProvider(tr.Provider)); err != nil {
			return err
		}
	}
	gw := newGateway(st, c.target, rules, log, c.ReadyUpstream, tel)
	handler = gw
	if tr != nil {
		// A server span per proxied request, continuing the caller's
		// traceparent; the gateway's own endpoints are not traced.
		handler = otelhttp.NewHandler(gw, "latchkey gateway",
			otelhttp.WithTracerProvider(tr.Provider),
			otelhttp.WithFilter(func(r *http.Request) bool { return !strings.HasPrefix(r.URL.Path, adminPrefix) }),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
		log.Info("exporting traces over OTLP", "protocol", tr.Protocol)
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("latchkey gateway listening", "addr", ln.Addr().String(), "upstream", c.target.Redacted(),
		"store", idemurl.Redact(c.Store), "rules", len(rules))

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	gw.shutdown(srv, c.Grace)
	return nil
}

// shutdown stops accepting and waits up to grace for requests in flight.
// Requests still running after grace are left as they are: the process
// exits, and their claims end at their in-progress deadlines, after which
// any gateway sharing the store runs a retry. Releasing them instead could
// run a payment twice: the upstream may be finishing it.
func (g *gateway) shutdown(srv *http.Server, grace time.Duration) {
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
		return
	}
	g.log.Info("stopped", "in_flight", g.inFlight.Load())
}
