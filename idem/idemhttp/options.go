package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/internal/optcheck"
)

// Defaults of the options.
const (
	// DefaultHeader is the request header that carries the key.
	DefaultHeader = "Idempotency-Key"
	// DefaultMaxRequestBody caps the request body read for the fingerprint.
	DefaultMaxRequestBody = 1 << 20
	// DefaultMaxResponseBody caps the response body kept for replay.
	DefaultMaxResponseBody = 1 << 20
)

// KeyFunc extracts the client's key from a request whose body has been read
// into body (r.Body is restored for the handler). It returns "" and no error
// when the request carries no key, and an error wrapping ErrKeyMalformed or
// ErrKeyTooLong when the key is bad.
type KeyFunc func(r *http.Request, body []byte) (string, error)

// An Option configures the middleware.
type Option func(*config)

type config struct {
	key         KeyFunc
	optional    bool
	methods     map[string]bool
	principal   func(*http.Request) string
	route       func(*http.Request) string
	fingerprint func(r *http.Request, body []byte) string
	store       func(status int) bool
	maxRequest  int64
	maxResponse int
	dropHeaders map[string]bool
	onError     func(*http.Request, error)
	logger      *slog.Logger // for the default onError; nil: slog.Default()
	observe     Observer     // nil: none
	optcheck.Config
}

func newConfig(opts []Option) *config {
	c := &config{
		key:         HeaderKey(DefaultHeader),
		methods:     map[string]bool{http.MethodPost: true, http.MethodPatch: true},
		principal:   AuthorizationPrincipal,
		route:       func(r *http.Request) string { return r.URL.EscapedPath() },
		fingerprint: Fingerprint,
		store:       func(status int) bool { return status < 500 },
		maxRequest:  DefaultMaxRequestBody,
		maxResponse: DefaultMaxResponseBody,
		dropHeaders: map[string]bool{},
	}
	c.onError = func(r *http.Request, err error) {
		l := c.logger
		if l == nil {
			l = slog.Default()
		}
		l.ErrorContext(r.Context(), "idemhttp", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// validToken says whether s is an HTTP token (RFC 9110, 5.6.2): what a
// header name or a method must be.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x80 || b <= ' ' || strings.IndexByte(`"(),/:;<=>?@[\]{}`, b) >= 0 || b == 0x7f {
			return false
		}
	}
	return true
}

// checkHeaderName says why name cannot be a header name, or nil.
func checkHeaderName(name string) error {
	if !validToken(name) {
		return fmt.Errorf("%w: not a header name", idem.ErrInvalid)
	}
	return nil
}

// HeaderKey reads the key from the named request header with ParseKey. A
// header sent twice is malformed.
func HeaderKey(name string) KeyFunc {
	name = textproto.CanonicalMIMEHeaderKey(name)
	return func(r *http.Request, _ []byte) (string, error) {
		vs := r.Header[name]
		switch len(vs) {
		case 0:
			return "", nil
		case 1:
			return ParseKey(vs[0])
		}
		return "", fmt.Errorf("%w: %s sent %d times", ErrKeyMalformed, name, len(vs))
	}
}

// BodyKey reads the key from a top-level string member of a JSON object body,
// as a Java service's @Idempotent(key = "#req.requestId") does. A body that is not
// a JSON object, or has no such member, carries no key; a member that is not a
// string is malformed.
func BodyKey(field string) KeyFunc {
	return func(_ *http.Request, body []byte) (string, error) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			return "", nil
		}
		raw, ok := obj[field]
		if !ok {
			return "", nil
		}
		var k string
		if err := json.Unmarshal(raw, &k); err != nil {
			return "", fmt.Errorf("%w: %s is not a JSON string", ErrKeyMalformed, field)
		}
		if k == "" {
			return "", fmt.Errorf("%w: empty", ErrKeyMalformed)
		}
		return k, checkKey(k)
	}
}

// WithHeader reads the key from the named header, which must be a valid
// header name. Default: Idempotency-Key ([DefaultHeader]).
func WithHeader(name string) Option {
	return func(c *config) {
		if err := checkHeaderName(name); err != nil {
			c.Reject(fmt.Sprintf("idemhttp.WithHeader(%q)", name), err)
			return
		}
		c.key = HeaderKey(name)
	}
}

// WithBodyKey reads the key from a JSON body member (see BodyKey), which must
// not be "", instead of a header. Default: the Idempotency-Key header.
func WithBodyKey(field string) Option {
	return func(c *config) {
		if field == "" {
			c.Reject(`idemhttp.WithBodyKey("")`, fmt.Errorf("%w: no member name", idem.ErrInvalid))
			return
		}
		c.key = BodyKey(field)
	}
}

// WithKeyFunc reads the key with f instead of a header. Keys from f follow the
// same rules as header keys: 1 to 255 bytes of printable ASCII.
func WithKeyFunc(f KeyFunc) Option {
	return func(c *config) {
		if f == nil {
			c.RejectNil("idemhttp.WithKeyFunc", "key function")
			return
		}
		c.key = func(r *http.Request, body []byte) (string, error) {
			k, err := f(r, body)
			if err != nil || k == "" {
				return k, err
			}
			return k, checkKey(k)
		}
	}
}

// WithOptionalKey lets requests without a key through unguarded. Default: a
// guarded request without a key gets 400.
func WithOptionalKey() Option {
	return func(c *config) { c.optional = true }
}

// WithMethods sets the methods the middleware guards; others pass through.
// At least one is needed, each an upper-case HTTP method (methods are
// case-sensitive: "post" would never match a POST). Default: POST and PATCH,
// the methods that are not idempotent by definition.
func WithMethods(methods ...string) Option {
	return func(c *config) {
		call := "idemhttp.WithMethods(" + quoteList(methods) + ")"
		if len(methods) == 0 {
			c.Reject(call, fmt.Errorf("%w: no method would be guarded; leave the option out for POST and PATCH", idem.ErrInvalid))
			return
		}
		set := map[string]bool{}
		for _, m := range methods {
			if !validToken(m) || strings.ToUpper(m) != m {
				c.Reject(call, fmt.Errorf("%w: %q is not an upper-case HTTP method", idem.ErrInvalid, m))
				return
			}
			set[m] = true
		}
		c.methods = set
	}
}

// quoteList writes ss as Go string literals separated by commas.
func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// WithPrincipal sets who a request acts for; keys of different principals
// never meet. Default: AuthorizationPrincipal. Prefer the authenticated
// account id: a client whose bearer token is refreshed between two copies of a
// request looks like another principal to the default, and its retry runs
// again.
func WithPrincipal(f func(*http.Request) string) Option {
	return func(c *config) {
		optcheck.SetFunc(&c.Config, &c.principal, f, "idemhttp.WithPrincipal", "principal function")
	}
}

// WithRoute sets the route part of the scope. Default: the request's escaped
// URL path, so a key reused on another resource (/orders/1/pay and
// /orders/2/pay) is another operation. A route pattern is also fine: the
// fingerprint covers the full path and query, so a reuse across resources
// gets 422 instead of a replay.
func WithRoute(f func(*http.Request) string) Option {
	return func(c *config) { optcheck.SetFunc(&c.Config, &c.route, f, "idemhttp.WithRoute", "route function") }
}

// WithFingerprint sets the request fingerprint; a request with a known key
// but another fingerprint gets 422. Default: Fingerprint.
func WithFingerprint(f func(r *http.Request, body []byte) string) Option {
	return func(c *config) {
		optcheck.SetFunc(&c.Config, &c.fingerprint, f, "idemhttp.WithFingerprint", "fingerprint function")
	}
}

// WithStoreStatus decides which handler statuses are recorded and replayed;
// the others release the claim so a retry runs the handler again. Default:
// everything below 500. 401 and 429 are never recorded, whatever f says: they
// are about the client's credentials and rate, not the operation. Record a 5xx
// (return true) when the handler may have taken effect before failing.
func WithStoreStatus(f func(status int) bool) Option {
	return func(c *config) {
		optcheck.SetFunc(&c.Config, &c.store, f, "idemhttp.WithStoreStatus", "status function")
	}
}

// WithInProgress sets the in-progress deadline (see idem.WithInProgress), from
// idem.MinDuration to idem.MaxDuration; the handler's request context ends at
// it. Default: 1 minute.
func WithInProgress(d time.Duration) Option {
	return func(c *config) { c.UseIdem(fmt.Sprintf("idemhttp.WithInProgress(%v)", d), idem.WithInProgress(d)) }
}

// WithRetention sets how long responses are replayed, from idem.MinDuration
// to idem.MaxDuration. Default: 24 hours.
func WithRetention(d time.Duration) Option {
	return func(c *config) { c.UseIdem(fmt.Sprintf("idemhttp.WithRetention(%v)", d), idem.WithRetention(d)) }
}

// WithWait makes a copy that arrives while the first request runs wait up to
// d (not negative) and replay its response, instead of getting 409 at once.
// Default: 0 (409).
func WithWait(d time.Duration) Option {
	return func(c *config) { c.UseIdem(fmt.Sprintf("idemhttp.WithWait(%v)", d), idem.WithWait(d)) }
}

// WithMaxRequestBody caps the request body, which is read whole to fingerprint
// it; a larger one gets 413. It must not be negative; 0 admits only requests
// without a body. Default: 1 MiB ([DefaultMaxRequestBody]).
func WithMaxRequestBody(n int64) Option {
	return func(c *config) {
		if n < 0 {
			c.Reject(fmt.Sprintf("idemhttp.WithMaxRequestBody(%d)", n), fmt.Errorf("%w: a negative body cap", idem.ErrInvalid))
			return
		}
		c.maxRequest = n
	}
}

// WithMaxResponseBody caps the response body kept for replay; it must not be
// negative. Default: 1 MiB ([DefaultMaxResponseBody]). A larger response
// reaches its client in full but is never replayed truncated: the operation is
// recorded as done, and copies get 500 with code "response-not-retained"
// rather than a second run.
func WithMaxResponseBody(n int64) Option {
	return func(c *config) {
		if n < 0 {
			c.Reject(fmt.Sprintf("idemhttp.WithMaxResponseBody(%d)", n), fmt.Errorf("%w: a negative body cap", idem.ErrInvalid))
			return
		}
		c.maxResponse = int(min(n, math.MaxInt))
	}
}

// WithDropHeaders names more response headers never to record. Always
// dropped: Set-Cookie, hop-by-hop headers and those named in Connection,
// Date, Content-Length, trailers.
func WithDropHeaders(names ...string) Option {
	return func(c *config) {
		for _, n := range names {
			c.dropHeaders[textproto.CanonicalMIMEHeaderKey(n)] = true
		}
	}
}

// WithErrorHandler receives errors that cannot reach the client because the
// response is already on its way (an outcome that could not be recorded).
// Default (also for a nil f): an Error record on the logger of WithLogger
// (slog.Default()).
func WithErrorHandler(f func(*http.Request, error)) Option {
	return func(c *config) {
		if f != nil {
			c.onError = f
		}
	}
}

// AuthorizationPrincipal is the default principal: a SHA-256 of the
// Authorization header (never the credential itself), or "" for anonymous
// requests, which therefore share one key space.
func AuthorizationPrincipal(r *http.Request) string {
	return AuthorizationDigest(r.Header.Get("Authorization"))
}

// AuthorizationDigest is the principal of an authorization credential:
// "authz-sha256:" and its hex SHA-256, or "" for none. Every middleware of
// latchkey (HTTP, gRPC) scopes keys by it, so one client's key means one
// operation whichever way its calls arrive.
func AuthorizationDigest(credential string) string {
	if credential == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(credential))
	return "authz-sha256:" + hex.EncodeToString(sum[:])
}

// Fingerprint is the default request fingerprint: SHA-256 over the method, the
// request URI (path and query), the Content-Type and the body, each part
// length-prefixed.
func Fingerprint(r *http.Request, body []byte) string {
	bsum := sha256.Sum256(body)
	// idem.Key(method, URI, Content-Type, body digest), in a buffer on the
	// stack for the usual request.
	b := make([]byte, 0, 256)
	b = appendKeyPart(b, "", r.Method)
	b = appendKeyPart(append(b, ' '), "", r.URL.RequestURI())
	b = appendKeyPart(append(b, ' '), "", r.Header.Get("Content-Type"))
	b = appendKeyPart(append(b, ' '), "", string(bsum[:]))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
