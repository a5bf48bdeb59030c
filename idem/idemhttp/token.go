package idemhttp

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/internal/optcheck"
)

// Defaults of RequireToken.
const (
	// DefaultTokenHeader carries a submit token sent by script.
	DefaultTokenHeader = "Submit-Token"
	// DefaultTokenField carries a submit token in an HTML form.
	DefaultTokenField = "submit_token"
)

// A TokenOption configures RequireToken.
type TokenOption func(*tokenConfig)

type tokenConfig struct {
	header, field string
	bind          func(*http.Request) string
	onError       func(*http.Request, error)
	optcheck.Config
}

// WithTokenHeader sets the header read first; it must be a valid header name,
// or "" to read no header. Default: Submit-Token ([DefaultTokenHeader]).
func WithTokenHeader(name string) TokenOption {
	return func(c *tokenConfig) {
		if name != "" {
			if err := checkHeaderName(name); err != nil {
				c.Reject(fmt.Sprintf("idemhttp.WithTokenHeader(%q)", name), err)
				return
			}
		}
		c.header = name
	}
}

// WithTokenField sets the form field read when the header is absent. Default:
// submit_token ([DefaultTokenField]); "" reads no form. Turning off both the
// header and the form is refused: no submit could carry a token.
func WithTokenField(name string) TokenOption { return func(c *tokenConfig) { c.field = name } }

// WithTokenBind sets the binding a token must have been issued with (see
// idem.IssueToken), typically the user and the form; f must not be nil.
// Default: "" for every request.
func WithTokenBind(f func(*http.Request) string) TokenOption {
	return func(c *tokenConfig) {
		optcheck.SetFunc(&c.Config, &c.bind, f, "idemhttp.WithTokenBind", "binding function")
	}
}

// RequireToken spends a one-time submit token on each unsafe request (not GET,
// HEAD, OPTIONS or TRACE) before the handler runs. Issue the token with
// idem.IssueToken when the form is shown. Answers, as problem+json:
//
//	no token                                   400, code "submit-token-missing"
//	token spent, expired, unknown, other bind  409, code "submit-token-used"
//	store unreachable                          503
//
// The token is spent even if the handler then fails: the user gets a fresh
// form. Put Middleware in front of it when a failed submit must be retryable
// with the same answer.
//
// RequireToken panics, with a message naming each bad option and its value,
// when an option is invalid or ts is nil, as Middleware does: a misconfigured
// guard never serves a request.
func RequireToken(ts idem.TokenStore, opts ...TokenOption) func(http.Handler) http.Handler {
	c := &tokenConfig{header: DefaultTokenHeader, field: DefaultTokenField, bind: func(*http.Request) string { return "" }}
	c.onError = func(r *http.Request, err error) { newConfig(nil).onError(r, err) }
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.header == "" && c.field == "" {
		c.Reject(`idemhttp.WithTokenHeader("") and idemhttp.WithTokenField("")`, fmt.Errorf("%w: no submit could carry a token", idem.ErrInvalid))
	}
	if ts == nil {
		c.Invalid = append(c.Invalid, fmt.Errorf("%w: nil token store", idem.ErrInvalid))
	}
	if err := c.Err(); err != nil {
		panic("idemhttp.RequireToken: " + err.Error())
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
				next.ServeHTTP(w, r)
				return
			}
			tok := r.Header.Get(c.header)
			if tok == "" && c.field != "" {
				tok = r.PostFormValue(c.field)
			}
			if tok == "" {
				writeProblem(w, http.StatusBadRequest, CodeTokenMissing, "this form needs a submit token")
				return
			}
			err := idem.ConsumeToken(r.Context(), ts, tok, c.bind(r))
			switch {
			case errors.Is(err, idem.ErrTokenInvalid):
				writeProblem(w, http.StatusConflict, CodeTokenUsed, "this form was already submitted, or its token expired; reload the form")
				return
			case err != nil:
				c.onError(r, fmt.Errorf("idemhttp: consuming submit token: %w", err))
				w.Header().Set("Retry-After", "1")
				writeProblem(w, http.StatusServiceUnavailable, CodeStoreUnavailable, "the token store is unavailable; the form was not processed")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
