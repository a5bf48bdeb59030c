package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/idemurl"
)

// gatewayConfig is the gateway's configuration file (JSON). Every field is
// optional; flags given on the command line win over the file. See
// testdata/gateway.json for an example with every field.
type gatewayConfig struct {
	// Listen is the address to serve on, host:port.
	Listen string `json:"listen"`
	// Upstream is the base URL of the service behind the gateway.
	Upstream string `json:"upstream"`
	// Store is the idempotency store's URL (see idem/idemurl).
	Store string `json:"store"`
	// Grace is how long a shutdown waits for requests in flight.
	Grace duration `json:"grace"`
	// ReadyUpstream makes /_latchkey/readyz also check that the upstream
	// accepts connections.
	ReadyUpstream bool `json:"ready_upstream"`
	// InProgress, Retention and Wait are the defaults of every rule.
	InProgress duration `json:"in_progress"`
	Retention  duration `json:"retention"`
	Wait       duration `json:"wait"`
	// MaxRequestBody and MaxResponseBody, in bytes, are the defaults of
	// every rule.
	MaxRequestBody  *int64 `json:"max_request_body"`
	MaxResponseBody *int64 `json:"max_response_body"`
	// Rules decide which requests are guarded and how; the first that
	// matches a request applies. No rules: the default rule.
	Rules []ruleConfig `json:"rules"`
}

// ruleConfig is one rule of the configuration file.
type ruleConfig struct {
	// Methods the rule applies to. Default: POST and PATCH.
	Methods []string `json:"methods"`
	// Path is a net/http ServeMux path pattern: "/payments/" matches the
	// subtree, "/orders/{id}/pay" one segment wildcard, "/exact/{$}" one
	// path. Default: "/", every path.
	Path string `json:"path"`
	// Key is "required" (no key: 400), "optional" (no key: passed through
	// unguarded) or "off" (never guarded). Default: "required".
	Key string `json:"key"`
	// Header carries the key. Default: Idempotency-Key.
	Header string `json:"header"`
	// BodyKey reads the key from this top-level string member of a JSON
	// body instead of a header.
	BodyKey string `json:"body_key"`
	// PrincipalHeader scopes keys by this request header (an account id set
	// by an authenticating proxy) instead of the Authorization header.
	PrincipalHeader string `json:"principal_header"`
	// InProgress, Retention and Wait override the top-level values.
	InProgress duration `json:"in_progress"`
	Retention  duration `json:"retention"`
	Wait       duration `json:"wait"`
	// MaxRequestBody caps a guarded request's body, read whole to
	// fingerprint it (larger: 413), and MaxResponseBody the response kept
	// for replay (larger: delivered once, then 500 response-not-retained
	// for copies, never a second run); in bytes. They override the
	// top-level values.
	MaxRequestBody  *int64 `json:"max_request_body"`
	MaxResponseBody *int64 `json:"max_response_body"`
}

// duration is a time.Duration written as a Go duration string ("30s"). A
// value that does not parse is kept and reported, with its field's name, by
// check.
type duration struct {
	d   time.Duration
	set bool
	bad string // the text that did not parse
}

func (x *duration) UnmarshalJSON(b []byte) error {
	x.set = true
	var s string
	if json.Unmarshal(b, &s) != nil {
		x.bad = string(b)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		x.bad = s
		return nil
	}
	x.d = v
	return nil
}

func (x duration) check(field string) error {
	if x.bad != "" {
		return fmt.Errorf("%s: %q is not a duration such as \"30s\"", field, x.bad)
	}
	return nil
}

// loadGatewayConfig reads and strictly decodes the file at path: unknown
// fields and trailing data are errors.
func loadGatewayConfig(path string) (*gatewayConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c gatewayConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%s: %s: want %s", path, te.Field, te.Type)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: data after the configuration object", path)
	}
	checks := map[string]duration{"grace": c.Grace, "in_progress": c.InProgress, "retention": c.Retention, "wait": c.Wait}
	for i, r := range c.Rules {
		for f, d := range map[string]duration{"in_progress": r.InProgress, "retention": r.Retention, "wait": r.Wait} {
			checks[fmt.Sprintf("rules[%d].%s", i, f)] = d
		}
	}
	for f, d := range checks {
		if err := d.check(f); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return &c, nil
}

// rule is a validated rule: where it applies and the middleware it puts in
// front of the upstream (nil: never guarded).
type rule struct {
	methods map[string]bool
	mux     *http.ServeMux
	match   *ruleMatch
	opts    []idemhttp.Option
	key     string // "required", "optional", "off"
	desc    string // for logs: "rules[0]" or "default rule"
	// inProgress is the rule's in-progress deadline.
	inProgress time.Duration
}

// ruleMatch is the handler a rule's mux routes matching paths to; matching
// is comparing the handler found with it.
type ruleMatch struct{}

func (*ruleMatch) ServeHTTP(http.ResponseWriter, *http.Request) {}

func (r *rule) matches(req *http.Request) bool {
	if !r.methods[req.Method] {
		return false
	}
	h, _ := r.mux.Handler(req)
	return h == r.match
}

// ruleDefaults are the values a rule takes when it does not set its own.
type ruleDefaults struct {
	inProgress, retention, wait     time.Duration
	maxRequestBody, maxResponseBody int64
}

// maxBodyCap bounds the body caps a configuration may set: a response is
// kept whole in the store, and a request read whole in memory.
const maxBodyCap = 1 << 30

// checkBodyCap checks a body cap of n bytes set as field.
func checkBodyCap(field string, n int64) error {
	if n < 1 || n > maxBodyCap {
		return fmt.Errorf("%s: %d bytes outside [1, %d]", field, n, maxBodyCap)
	}
	return nil
}

// defaultRule is the rule of a gateway with no rules configured: POST and
// PATCH requests that carry an Idempotency-Key are guarded, all others pass.
func defaultRule() ruleConfig {
	return ruleConfig{Key: "optional"}
}

// buildRule validates rc; errors name the field as where.field.
func buildRule(where string, rc ruleConfig, d ruleDefaults, onError func(*http.Request, error)) (*rule, error) {
	r := &rule{methods: map[string]bool{}, match: &ruleMatch{}, desc: where}
	methods := rc.Methods
	if methods == nil {
		methods = []string{http.MethodPost, http.MethodPatch}
	}
	if len(methods) == 0 {
		return nil, fmt.Errorf("%s.methods: empty; leave it out for POST and PATCH", where)
	}
	for _, m := range methods {
		if m == "" || strings.ToUpper(m) != m || strings.ContainsFunc(m, func(c rune) bool { return c < 'A' || c > 'Z' }) {
			return nil, fmt.Errorf("%s.methods: %q is not an upper-case HTTP method", where, m)
		}
		r.methods[m] = true
	}
	path := rc.Path
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%s.path: %q must start with /; methods go in \"methods\"", where, path)
	}
	r.mux = http.NewServeMux()
	if err := registerPattern(r.mux, path, r.match); err != nil {
		return nil, fmt.Errorf("%s.path: %w", where, err)
	}

	r.key = rc.Key
	switch rc.Key {
	case "":
		r.key = "required"
	case "required", "optional", "off":
	default:
		return nil, fmt.Errorf("%s.key: %q; want required, optional or off", where, rc.Key)
	}
	if rc.Header != "" && rc.BodyKey != "" {
		return nil, fmt.Errorf("%s: header and body_key both set; the key comes from one place", where)
	}
	if rc.Header != "" && !validHeaderName(rc.Header) {
		return nil, fmt.Errorf("%s.header: %q is not a header name", where, rc.Header)
	}
	if rc.PrincipalHeader != "" && !validHeaderName(rc.PrincipalHeader) {
		return nil, fmt.Errorf("%s.principal_header: %q is not a header name", where, rc.PrincipalHeader)
	}
	inProgress, retention, wait := d.inProgress, d.retention, d.wait
	if rc.InProgress.set {
		inProgress = rc.InProgress.d
	}
	if rc.Retention.set {
		retention = rc.Retention.d
	}
	if rc.Wait.set {
		wait = rc.Wait.d
	}
	for _, c := range []struct {
		field string
		v     time.Duration
	}{{"in_progress", inProgress}, {"retention", retention}} {
		if c.v < idem.MinDuration || c.v > idem.MaxDuration {
			return nil, fmt.Errorf("%s.%s: %v outside [%v, %v]", where, c.field, c.v, idem.MinDuration, idem.MaxDuration)
		}
	}
	if wait < 0 {
		return nil, fmt.Errorf("%s.wait: negative (%v)", where, wait)
	}
	if wait >= inProgress {
		return nil, fmt.Errorf("%s.wait: %v is not shorter than in_progress %v", where, wait, inProgress)
	}
	maxRequest, maxResponse := d.maxRequestBody, d.maxResponseBody
	if rc.MaxRequestBody != nil {
		maxRequest = *rc.MaxRequestBody
	}
	if rc.MaxResponseBody != nil {
		maxResponse = *rc.MaxResponseBody
	}
	if err := checkBodyCap(where+".max_request_body", maxRequest); err != nil {
		return nil, err
	}
	if err := checkBodyCap(where+".max_response_body", maxResponse); err != nil {
		return nil, err
	}

	keyFunc := idemhttp.HeaderKey(idemhttp.DefaultHeader)
	switch {
	case rc.BodyKey != "":
		keyFunc = idemhttp.BodyKey(rc.BodyKey)
	case rc.Header != "":
		keyFunc = idemhttp.HeaderKey(rc.Header)
	}
	r.inProgress = inProgress
	r.opts = []idemhttp.Option{
		idemhttp.WithMethods(methods...),
		idemhttp.WithKeyFunc(noteKey(keyFunc)),
		idemhttp.WithInProgress(inProgress),
		idemhttp.WithRetention(retention),
		idemhttp.WithWait(wait),
		idemhttp.WithMaxRequestBody(maxRequest),
		idemhttp.WithMaxResponseBody(int(maxResponse)),
		idemhttp.WithErrorHandler(onError),
	}
	if r.key == "optional" {
		r.opts = append(r.opts, idemhttp.WithOptionalKey())
	}
	if h := rc.PrincipalHeader; h != "" {
		r.opts = append(r.opts, idemhttp.WithPrincipal(func(req *http.Request) string {
			if v := req.Header.Get(h); v != "" {
				return "header:" + v // the middleware keeps only a digest
			}
			return ""
		}))
	}
	return r, nil
}

// registerPattern adds pattern to mux, turning ServeMux's panic on a bad
// pattern into an error.
func registerPattern(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	if strings.ContainsAny(pattern, " \t") {
		return fmt.Errorf("%q: a path pattern has no spaces; methods go in \"methods\"", pattern)
	}
	mux.Handle(pattern, h)
	return nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > 0x7e || c <= 0x20 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

// checkUpstream validates the upstream URL: http or https, with a host.
func checkUpstream(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("--upstream is required (the URL of the service behind the gateway)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("upstream %q: %w", idemurl.Redact(raw), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("upstream %q: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("upstream %q: no host", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("upstream %q: a base URL takes no query or fragment", u.Redacted())
	}
	return u, nil
}
