package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/latchkey-go/latchkey/idem/idemhttp/idemhttptest"
)

// otlpReceiver keeps the spans of the OTLP export requests it receives, as
// a collector would: over HTTP (POST /v1/traces, protobuf) or gRPC
// (TraceService/Export).
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	spans    []*tracepb.Span // guarded by mu
	services []string        // service.name of each resource; guarded by mu
}

func (o *otlpReceiver) add(req *collectortrace.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				o.services = append(o.services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
}

// Export implements the gRPC TraceService.
func (o *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	o.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP implements OTLP/HTTP with protobuf bodies.
func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.add(&req)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// serve receives OTLP over protocol ("grpc" or "http/protobuf") for the
// test's lifetime and returns the endpoint to export to.
func (o *otlpReceiver) serve(t *testing.T, protocol string) string {
	t.Helper()
	if protocol != "grpc" {
		srv := httptest.NewServer(o)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, o)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return "http://" + ln.Addr().String()
}

func (o *otlpReceiver) named(name string) []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range o.spans {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// waitNamed waits up to 20 s for n spans named name and returns them; g's
// log tells why when they do not come.
func (o *otlpReceiver) waitNamed(t *testing.T, name string, n int, g *gatewayProc) []*tracepb.Span {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(o.named(name)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("spans received: %d server\n%s", len(o.named(name)), g.stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return o.named(name)
}

// waitSpan waits up to 10 s for the span whose ID is id in hex; nil if it
// does not come.
func (o *otlpReceiver) waitSpan(id string) *tracepb.Span {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if s := o.withID(id); s != nil {
			return s
		}
	}
	return nil
}

func (o *otlpReceiver) withID(id string) *tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if hex.EncodeToString(s.GetSpanId()) == id {
			return s
		}
	}
	return nil
}

func spanAttr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// TestGatewayExportsTraces starts the gateway with OTEL_* pointing at a
// receiver in the test, once per OTLP protocol, and sends one payment twice
// with a traceparent: the gateway's server spans continue the caller's
// trace and carry the idempotency outcome, the upstream gets a traceparent of the same trace whose parent is
// the gateway's client span, the copy's server span has a replay event,
// and no key, principal or body is in any attribute.
func TestGatewayExportsTraces(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			t.Parallel()
			exportTraces(t, protocol)
		})
	}
}

// exportTraces is TestGatewayExportsTraces over one OTLP protocol.
func exportTraces(t *testing.T, protocol string) {
	recv := &otlpReceiver{}
	endpoint := recv.serve(t, protocol)
	up := &recorder{next: idemhttptest.NewUpstream()}
	upSrv := upstreamServer(t, up)
	cache := t.TempDir()
	g := startGateway(t, []string{
		"XDG_CACHE_HOME=" + cache, "HOME=" + cache,
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
		"OTEL_SERVICE_NAME=gw-under-test",
		"OTEL_BSP_SCHEDULE_DELAY=100", // export within 100 ms, not 5 s
	}, "--upstream", upSrv.URL, "--store", "mem://")

	const (
		traceID   = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerID  = "00f067aa0ba902b7"
		key       = "pay-key-otel-77"
		principal = "Bearer sk_live_principal_31"
	)
	tp := "00-" + traceID + "-" + callerID + "-01"
	for i := range 2 {
		a := send(t, "POST", g.url+"/payments", key, "traceparent", tp, "Authorization", principal)
		if a.status != http.StatusCreated {
			t.Fatalf("request %d: %d %s", i, a.status, a.body)
		}
	}
	n, hdr := up.last()
	if n != 1 {
		t.Fatalf("upstream ran %d times", n)
	}
	upTP := hdr.Get("Traceparent")
	parts := strings.Split(upTP, "-")
	if len(parts) != 4 || parts[1] != traceID || parts[2] == callerID {
		t.Fatalf("upstream traceparent %q: want trace %s with the gateway's span as parent", upTP, traceID)
	}

	serverIDs := checkServerSpans(t, recv.waitNamed(t, "POST", 2, g), traceID, callerID)
	// The upstream's traceparent names the gateway's client span, a child of
	// the first server span.
	client := recv.waitSpan(parts[2])
	if client == nil || client.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || !serverIDs[hex.EncodeToString(client.GetParentSpanId())] {
		t.Errorf("the upstream's parent span %s is not a client span under a server span: %v", parts[2], client)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if !strings.Contains(g.stderr(), "trace_id="+traceID) {
		t.Errorf("the request log does not name the trace:\n%s", g.stderr())
	}
	if len(recv.services) == 0 || recv.services[0] != "gw-under-test" {
		t.Errorf("service names %v", recv.services)
	}
	for _, s := range recv.spans {
		noSecrets(t, "span "+s.GetName(), s.GetAttributes(), key, "sk_live_principal_31", `"amount"`)
		for _, e := range s.GetEvents() {
			noSecrets(t, "event "+e.GetName(), e.GetAttributes(), key, "sk_live_principal_31", `"amount"`)
		}
	}
}

// checkServerSpans checks the gateway's server spans of a request and its
// copy: both continue the caller's trace, under the caller's span; the
// copy's has the one replay event; each carries its outcome. It returns the
// spans' IDs, in hex.
func checkServerSpans(t *testing.T, servers []*tracepb.Span, traceID, callerID string) map[string]bool {
	t.Helper()
	replays := 0
	for _, s := range servers {
		if hex.EncodeToString(s.GetTraceId()) != traceID || hex.EncodeToString(s.GetParentSpanId()) != callerID {
			t.Errorf("server span trace %x parent %x: want the caller's", s.GetTraceId(), s.GetParentSpanId())
		}
		if s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("server span kind %v", s.GetKind())
		}
		for _, e := range s.GetEvents() {
			if e.GetName() == "latchkey.idem.replayed" {
				replays++
			}
		}
	}
	if replays != 1 {
		t.Errorf("%d replay events on the server spans, want 1", replays)
	}
	// Each outcome is an attribute of its request's span.
	serverIDs := map[string]bool{}
	var outcomes []string
	for _, s := range servers {
		serverIDs[hex.EncodeToString(s.GetSpanId())] = true
		outcomes = append(outcomes, spanAttr(s, "latchkey.idem.outcome").GetStringValue())
	}
	if fmt.Sprint(outcomes) != "[executed replayed]" {
		t.Errorf("outcomes %v", outcomes)
	}
	return serverIDs
}

// noSecrets checks that no attribute of kvs, found where, holds one of
// secrets.
func noSecrets(t *testing.T, where string, kvs []*commonpb.KeyValue, secrets ...string) {
	t.Helper()
	for _, kv := range kvs {
		v := kv.GetValue().String()
		for _, secret := range secrets {
			if strings.Contains(v, secret) {
				t.Errorf("%s: attribute %s holds %q", where, kv.GetKey(), secret)
			}
		}
	}
}

// TestGatewayBadOTLPProtocol checks that an OTLP protocol the gateway does
// not know is a usage error, before anything starts.
func TestGatewayBadOTLPProtocol(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "gateway", "--upstream", "http://127.0.0.1:1", "--store", "mem://",
		"--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "HOME="+cache,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "http/json") || strings.Contains(string(out), "listening") {
		t.Fatalf("%v, want exit %d before listening; output:\n%s", err, exitUsage, out)
	}
}
