package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// A rule is built in three steps: parseRule settles every value (the rule's
// own, else the top level's, else the default), validate checks them, and
// build turns them into a matcher and the middleware's options.

// ruleSpec is a rule with every value settled, not yet checked.
type ruleSpec struct {
	where   string // for errors and logs: "rules[0]" or "default rule"
	methods []string
	path    string
	key     string // "required", "optional", "off"
	header  string
	bodyKey string
	// principalHeader scopes keys by this header; "": the Authorization header.
	principalHeader string
	limits          settings // InProgress, Retention, Wait and the body caps
}

// defaultRule is the rule of a gateway with no rules configured: POST and
// PATCH requests that carry an Idempotency-Key are guarded, all others pass.
func defaultRule() ruleConfig {
	return ruleConfig{Key: "optional"}
}

// parseRule settles rc's values: its own where set, else top's, else the
// defaults.
func parseRule(where string, rc ruleConfig, top settings) ruleSpec {
	s := ruleSpec{where: where, methods: rc.Methods, path: rc.Path, key: rc.Key, header: rc.Header,
		bodyKey: rc.BodyKey, principalHeader: rc.PrincipalHeader, limits: rc.limits.over(top)}
	if s.methods == nil { // an empty list is kept, for validate to refuse
		s.methods = []string{http.MethodPost, http.MethodPatch}
	}
	if s.path == "" {
		s.path = "/"
	}
	if s.key == "" {
		s.key = "required"
	}
	return s
}

// validate checks the rule; errors name the field as where.field.
func (s ruleSpec) validate() error {
	where := s.where
	if len(s.methods) == 0 {
		return fmt.Errorf("%s.methods: empty; leave it out for POST and PATCH", where)
	}
	for _, m := range s.methods {
		if m == "" || strings.ContainsFunc(m, func(c rune) bool { return c < 'A' || c > 'Z' }) {
			return fmt.Errorf("%s.methods: %q is not an upper-case HTTP method", where, m)
		}
	}
	if !strings.HasPrefix(s.path, "/") {
		return fmt.Errorf("%s.path: %q must start with /; methods go in \"methods\"", where, s.path)
	}
	if _, err := pathMatcher(s.path); err != nil {
		return fmt.Errorf("%s.path: %w", where, err)
	}
	switch s.key {
	case "required", "optional", "off":
	default:
		return fmt.Errorf("%s.key: %q; want required, optional or off", where, s.key)
	}
	if s.header != "" && s.bodyKey != "" {
		return fmt.Errorf("%s: header and body_key both set; the key comes from one place", where)
	}
	if s.header != "" && !validHeaderName(s.header) {
		return fmt.Errorf("%s.header: %q is not a header name", where, s.header)
	}
	if s.principalHeader != "" && !validHeaderName(s.principalHeader) {
		return fmt.Errorf("%s.principal_header: %q is not a header name", where, s.principalHeader)
	}
	l := s.limits
	for _, c := range []struct {
		field string
		v     time.Duration
	}{{"in_progress", l.InProgress}, {"retention", l.Retention}} {
		if c.v < idem.MinDuration || c.v > idem.MaxDuration {
			return fmt.Errorf("%s.%s: %v outside [%v, %v]", where, c.field, c.v, idem.MinDuration, idem.MaxDuration)
		}
	}
	if l.Wait < 0 {
		return fmt.Errorf("%s.wait: negative (%v)", where, l.Wait)
	}
	if l.Wait >= l.InProgress {
		return fmt.Errorf("%s.wait: %v is not shorter than in_progress %v", where, l.Wait, l.InProgress)
	}
	if err := checkBodyCap(where+".max_request_body", l.MaxRequestBody); err != nil {
		return err
	}
	return checkBodyCap(where+".max_response_body", l.MaxResponseBody)
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

// rule is a built rule: where it applies and the middleware's options for
// the requests it guards.
type rule struct {
	methods map[string]bool
	mux     *http.ServeMux // routes the paths that match to matched
	opts    []idemhttp.Option
	key     string // "required", "optional", "off"
	desc    string // for logs: "rules[0]" or "default rule"
	// inProgress is the rule's in-progress deadline.
	inProgress time.Duration
}

// ruleMatch is the handler a rule's mux routes matching paths to; matching
// is comparing the handler found with matched.
type ruleMatch struct{}

func (*ruleMatch) ServeHTTP(http.ResponseWriter, *http.Request) {}

var matched = &ruleMatch{}

func (r *rule) matches(req *http.Request) bool {
	if !r.methods[req.Method] {
		return false
	}
	h, _ := r.mux.Handler(req)
	return h == http.Handler(matched)
}

// pathMatcher returns a mux that routes the paths pattern matches to
// matched, turning ServeMux's panic on a bad pattern into an error.
func pathMatcher(pattern string) (mux *http.ServeMux, err error) {
	if strings.ContainsAny(pattern, " \t") {
		return nil, fmt.Errorf("%q: a path pattern has no spaces; methods go in \"methods\"", pattern)
	}
	defer func() {
		if p := recover(); p != nil {
			mux, err = nil, fmt.Errorf("%v", p)
		}
	}()
	mux = http.NewServeMux()
	mux.Handle(pattern, matched)
	return mux, nil
}

// build turns a validated rule into its matcher and options; onError is
// told of the store's failures.
func (s ruleSpec) build(onError func(*http.Request, error)) *rule {
	mux, _ := pathMatcher(s.path) // validate checked the pattern
	r := &rule{methods: map[string]bool{}, mux: mux, key: s.key, desc: s.where, inProgress: s.limits.InProgress}
	for _, m := range s.methods {
		r.methods[m] = true
	}
	keyFunc := idemhttp.HeaderKey(idemhttp.DefaultHeader)
	switch {
	case s.bodyKey != "":
		keyFunc = idemhttp.BodyKey(s.bodyKey)
	case s.header != "":
		keyFunc = idemhttp.HeaderKey(s.header)
	}
	l := s.limits
	r.opts = []idemhttp.Option{
		idemhttp.WithMethods(s.methods...),
		idemhttp.WithKeyFunc(noteKey(keyFunc)),
		idemhttp.WithInProgress(l.InProgress),
		idemhttp.WithRetention(l.Retention),
		idemhttp.WithWait(l.Wait),
		idemhttp.WithMaxRequestBody(l.MaxRequestBody),
		idemhttp.WithMaxResponseBody(l.MaxResponseBody),
		idemhttp.WithErrorHandler(onError),
	}
	if s.key == "optional" {
		r.opts = append(r.opts, idemhttp.WithOptionalKey())
	}
	if h := s.principalHeader; h != "" {
		r.opts = append(r.opts, idemhttp.WithPrincipal(func(req *http.Request) string {
			if v := req.Header.Get(h); v != "" {
				return "header:" + v // the middleware keeps only a digest
			}
			return ""
		}))
	}
	return r
}
