package gateway

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
	"github.com/latchkey-go/latchkey/idem/idemurl"
)

// settings are the gateway's top-level values: each one a flag, and a field
// at the top of the configuration file.
type settings struct {
	Listen, Upstream, Store     string
	Grace                       time.Duration
	ReadyUpstream               bool
	InProgress, Retention, Wait time.Duration
	MaxRequestBody              int64
	MaxResponseBody             int64
}

// defaultSettings are the values of a gateway given neither flags nor file.
func defaultSettings() settings {
	return settings{
		Listen:          "127.0.0.1:8080",
		Store:           DefaultStore(),
		Grace:           30 * time.Second,
		InProgress:      idem.DefaultInProgress,
		Retention:       idem.DefaultRetention,
		MaxRequestBody:  idemhttp.DefaultMaxRequestBody,
		MaxResponseBody: idemhttp.DefaultMaxResponseBody,
	}
}

// DefaultStore is the gateway's store when neither --store nor the file
// names one: an SQLite file in the user's cache directory, or in the working
// directory when there is none. The operator's idem commands default to it too.
func DefaultStore() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "sqlite:latchkey-gateway.db"
	}
	return "sqlite://" + filepath.ToSlash(filepath.Join(dir, "latchkey", "gateway.db"))
}

// define defines one flag for each setting on fs, bound to s's field; s's
// values are the defaults the help shows.
func (s *settings) define(fs *flag.FlagSet) {
	fs.StringVar(&s.Listen, "listen", s.Listen, "address to serve on, host:port (port 0: any free port)")
	fs.StringVar(&s.Upstream, "upstream", s.Upstream, "base URL of the service behind the gateway, http:// or https:// (required)")
	fs.StringVar(&s.Store, "store", s.Store,
		"idempotency store URL: sqlite:///path, postgres://..., redis://host:port[?prefix=P], redis-cluster://..., mem://")
	fs.DurationVar(&s.InProgress, "in-progress", s.InProgress,
		"in-progress deadline: a claim whose request has not finished by then is taken over; the upstream call is cancelled at it")
	fs.DurationVar(&s.Retention, "retention", s.Retention, "how long responses are replayed")
	fs.DurationVar(&s.Wait, "wait", s.Wait, "a copy arriving while the first runs waits up to this long and replays it; 0 answers 409")
	fs.DurationVar(&s.Grace, "grace", s.Grace, "on SIGTERM, how long requests in flight may finish")
	fs.BoolVar(&s.ReadyUpstream, "ready-upstream", s.ReadyUpstream, "readyz also checks that the upstream accepts connections")
	fs.Int64Var(&s.MaxRequestBody, "max-request-body", s.MaxRequestBody,
		"bytes: a guarded request's body is read whole to fingerprint it; a larger one gets 413")
	fs.Int64Var(&s.MaxResponseBody, "max-response-body", s.MaxResponseBody,
		"bytes: the response kept for replay; a larger one reaches its client, and copies get 500 response-not-retained, never a second run")
}

// merge returns file with every flag that was given on the command line
// (fs.Visit) laid over it. Each given flag is set again, from its own text,
// on a flag bound to the result: the standard flag values print what they
// parse.
func merge(file settings, fs *flag.FlagSet) settings {
	merged := file
	into := flag.NewFlagSet("merge", flag.ContinueOnError)
	merged.define(into)
	fs.Visit(func(f *flag.Flag) {
		if into.Lookup(f.Name) != nil { // --config is no setting
			_ = into.Set(f.Name, f.Value.String())
		}
	})
	return merged
}

// A CommandLine is the gateway's flags, defined on a FlagSet by Flags.
type CommandLine struct {
	fs     *flag.FlagSet
	given  settings // bound to the flags
	config string   // --config
}

// Flags defines the gateway's flags on fs and sets fs.Usage to the
// gateway's help.
func Flags(fs *flag.FlagSet) *CommandLine {
	c := &CommandLine{fs: fs, given: defaultSettings()}
	c.given.define(fs)
	fs.StringVar(&c.config, "config", "", "JSON file with rules and defaults (see above); flags win over it")
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	return c
}

// A Config is a checked configuration, ready to Serve.
type Config struct {
	settings
	target *url.URL
	rules  []ruleSpec
}

// Config reads the --config file, if any, lays the flags that were given
// over it, and checks the result. Call it after fs is parsed. Every error it
// returns is a usage error: it names the flag or the file's field at fault.
func (c *CommandLine) Config() (*Config, error) {
	file := &fileConfig{}
	if c.config != "" {
		var err error
		if file, err = loadFile(c.config); err != nil {
			return nil, err
		}
	}
	s := merge(file.over(defaultSettings()), c.fs)
	return s.check(file.Rules)
}

// check validates s and the rules, which take their defaults from s.
func (s settings) check(rules []ruleConfig) (*Config, error) {
	target, err := checkUpstream(s.Upstream)
	if err != nil {
		return nil, err
	}
	if err := checkBodyCap("--max-request-body (max_request_body)", s.MaxRequestBody); err != nil {
		return nil, err
	}
	if err := checkBodyCap("--max-response-body (max_response_body)", s.MaxResponseBody); err != nil {
		return nil, err
	}
	if s.Grace < 0 {
		return nil, errors.New("--grace must not be negative")
	}
	c := &Config{settings: s, target: target}
	if len(rules) == 0 {
		r := parseRule("default rule", defaultRule(), s)
		if err := r.validate(); err != nil { // only the flags can be wrong
			return nil, fmt.Errorf("flags: %w", err)
		}
		c.rules = append(c.rules, r)
	}
	for i, rc := range rules {
		r := parseRule(fmt.Sprintf("rules[%d]", i), rc, s)
		if err := r.validate(); err != nil {
			return nil, err
		}
		c.rules = append(c.rules, r)
	}
	return c, nil
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
