package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// fileConfig is the gateway's configuration file (JSON). Every field is
// optional; flags given on the command line win over the file. See
// testdata/gateway.json for an example with every field.
type fileConfig struct {
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
	// The defaults of every rule.
	limits
	// Rules decide which requests are guarded and how; the first that
	// matches a request applies. No rules: the default rule.
	Rules []ruleConfig `json:"rules"`
}

// limits are the values a rule sets for itself or takes from the top level
// of the file (and the flags).
type limits struct {
	// InProgress is the in-progress deadline, Retention how long an answer
	// is replayed, Wait how long a copy waits for the first to finish.
	InProgress duration `json:"in_progress"`
	Retention  duration `json:"retention"`
	Wait       duration `json:"wait"`
	// MaxRequestBody caps a guarded request's body, read whole to
	// fingerprint it (larger: 413), and MaxResponseBody the response kept
	// for replay (larger: delivered once, then 500 response-not-retained
	// for copies, never a second run); in bytes.
	MaxRequestBody  *int64 `json:"max_request_body"`
	MaxResponseBody *int64 `json:"max_response_body"`
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
	// The rule's own values, over the top level's.
	limits
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

// or returns x's value if the file set it, else def.
func (x duration) or(def time.Duration) time.Duration {
	if x.set {
		return x.d
	}
	return def
}

// orInt returns *p if the file set it, else def.
func orInt(p *int64, def int64) int64 {
	if p != nil {
		return *p
	}
	return def
}

// orString returns s if the file set it, else def.
func orString(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// over returns d with every limit l sets replacing d's.
func (l limits) over(d settings) settings {
	d.InProgress = l.InProgress.or(d.InProgress)
	d.Retention = l.Retention.or(d.Retention)
	d.Wait = l.Wait.or(d.Wait)
	d.MaxRequestBody = orInt(l.MaxRequestBody, d.MaxRequestBody)
	d.MaxResponseBody = orInt(l.MaxResponseBody, d.MaxResponseBody)
	return d
}

// check reports a duration that did not parse, naming it prefix+field.
func (l limits) check(prefix string) error {
	for _, f := range []struct {
		name string
		d    duration
	}{{"in_progress", l.InProgress}, {"retention", l.Retention}, {"wait", l.Wait}} {
		if err := f.d.check(prefix + f.name); err != nil {
			return err
		}
	}
	return nil
}

// over returns d with every value the file sets replacing d's.
func (c *fileConfig) over(d settings) settings {
	d.Listen = orString(c.Listen, d.Listen)
	d.Upstream = orString(c.Upstream, d.Upstream)
	d.Store = orString(c.Store, d.Store)
	d.Grace = c.Grace.or(d.Grace)
	d.ReadyUpstream = c.ReadyUpstream || d.ReadyUpstream
	return c.limits.over(d)
}

// loadFile reads and strictly decodes the file at path: unknown fields and
// trailing data are errors, and so is a duration that does not parse.
func loadFile(path string) (*fileConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c fileConfig
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
	if err := c.Grace.check("grace"); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.limits.check(""); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, r := range c.Rules {
		if err := r.limits.check(fmt.Sprintf("rules[%d].", i)); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return &c, nil
}
