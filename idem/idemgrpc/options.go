package idemgrpc

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/internal/optcheck"
)

// Defaults of the options.
const (
	// DefaultMetadataKey is the request metadata key that carries the
	// idempotency key.
	DefaultMetadataKey = "idempotency-key"
	// ReplayedMetadataKey is the response header metadata key set to "true"
	// on a replayed answer.
	ReplayedMetadataKey = "idempotent-replayed"
	// DefaultMaxRequestSize caps the encoded request message that is
	// fingerprinted.
	DefaultMaxRequestSize = 1 << 20
	// DefaultMaxResponseSize caps the recorded answer: the encoded response
	// message or status and the handler's metadata.
	DefaultMaxResponseSize = 1 << 20
)

// An Option configures the server and client interceptors. The client
// interceptor reads only WithMethods, WithMethodFunc and WithMetadataKey.
type Option func(*config)

type config struct {
	mdKey       string
	methods     func(fullMethod string) bool
	optional    bool
	principal   func(ctx context.Context) string
	record      func(codes.Code) bool
	maxRequest  int
	maxResponse int
	logger      *slog.Logger // nil: slog.Default()
	observe     Observer     // nil: none
	optcheck.Config
}

func newConfig(opts []Option) *config {
	c := &config{
		mdKey:       DefaultMetadataKey,
		principal:   AuthorizationPrincipal,
		record:      DefaultRecordCode,
		maxRequest:  DefaultMaxRequestSize,
		maxResponse: DefaultMaxResponseSize,
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.methods == nil {
		c.Invalid = append(c.Invalid, fmt.Errorf("%w: no method is guarded; name them with WithMethods or WithMethodFunc", idem.ErrInvalid))
	}
	return c
}

func (c *config) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

// WithMethods guards the named unary methods, each a full method name such
// as "/payments.v1.Payments/Charge" (grpc.UnaryServerInfo.FullMethod). Calls
// of other methods pass through. There is no default: a guard must name its
// methods, with this option or WithMethodFunc, because gRPC, unlike HTTP, has
// no verb that marks the calls with effects.
func WithMethods(fullMethods ...string) Option {
	return func(c *config) {
		call := fmt.Sprintf("idemgrpc.WithMethods(%q)", fullMethods)
		if len(fullMethods) == 0 {
			c.Reject(call, fmt.Errorf("%w: no method named", idem.ErrInvalid))
			return
		}
		set := make(map[string]bool, len(fullMethods))
		for _, m := range fullMethods {
			if !validMethod(m) {
				c.Reject(call, fmt.Errorf("%w: %q is not a full method name /package.Service/Method", idem.ErrInvalid, m))
				return
			}
			set[m] = true
		}
		c.methods = func(m string) bool { return set[m] }
	}
}

// WithMethodFunc guards the methods for which f returns true, given the full
// method name. Default: none (see WithMethods).
func WithMethodFunc(f func(fullMethod string) bool) Option {
	return func(c *config) {
		optcheck.SetFunc(&c.Config, &c.methods, f, "idemgrpc.WithMethodFunc", "method predicate")
	}
}

// validMethod says whether m has the shape /service/method.
func validMethod(m string) bool {
	svc, name, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	return strings.HasPrefix(m, "/") && ok && svc != "" && name != "" && !strings.ContainsAny(name, "/ ")
}

// WithMetadataKey reads the key from the named request metadata key, which
// must be a valid metadata key (lower case letters, digits, "-", "_", ".";
// not "grpc-" reserved names nor a binary "-bin" key). The client interceptor
// writes the key under the same name. Default: "idempotency-key"
// ([DefaultMetadataKey]).
func WithMetadataKey(name string) Option {
	return func(c *config) {
		if err := checkMetadataKey(name); err != nil {
			c.Reject(fmt.Sprintf("idemgrpc.WithMetadataKey(%q)", name), err)
			return
		}
		c.mdKey = name
	}
}

func checkMetadataKey(name string) error {
	if name == "" || strings.HasPrefix(name, "grpc-") || strings.HasSuffix(name, "-bin") {
		return fmt.Errorf("%w: not a usable metadata key", idem.ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.') {
			return fmt.Errorf("%w: byte %q is not allowed in a metadata key", idem.ErrInvalid, b)
		}
	}
	return nil
}

// WithOptionalKey lets calls of guarded methods without a key through,
// unguarded. Default: such a call is refused with InvalidArgument.
func WithOptionalKey() Option {
	return func(c *config) { c.optional = true }
}

// WithPrincipal sets who a call acts for, from the call's context (the
// authenticated account your auth interceptor put there, say); keys of
// different principals never meet. Default: AuthorizationPrincipal. The
// peer's address is a poor principal: a client that reconnects from another
// port would look like another principal and its retry would run again.
func WithPrincipal(f func(ctx context.Context) string) Option {
	return func(c *config) {
		optcheck.SetFunc(&c.Config, &c.principal, f, "idemgrpc.WithPrincipal", "principal function")
	}
}

// WithRecordCode decides which final status codes of the handler are
// recorded and replayed; the others release the claim so a retry runs the
// handler again. Default: DefaultRecordCode. Whatever f says, OK is always
// recorded and the transient codes (Canceled, DeadlineExceeded, Unavailable,
// ResourceExhausted, Aborted) and Unauthenticated never are.
func WithRecordCode(f func(codes.Code) bool) Option {
	return func(c *config) { optcheck.SetFunc(&c.Config, &c.record, f, "idemgrpc.WithRecordCode", "code function") }
}

// WithInProgress sets the in-progress deadline (see idem.WithInProgress),
// from idem.MinDuration to idem.MaxDuration; the handler's context ends at
// it. Default: 1 minute.
func WithInProgress(d time.Duration) Option {
	return func(c *config) { c.UseIdem(fmt.Sprintf("idemgrpc.WithInProgress(%v)", d), idem.WithInProgress(d)) }
}

// WithRetention sets how long answers are replayed, from idem.MinDuration to
// idem.MaxDuration. Default: 24 hours.
func WithRetention(d time.Duration) Option {
	return func(c *config) { c.UseIdem(fmt.Sprintf("idemgrpc.WithRetention(%v)", d), idem.WithRetention(d)) }
}

// WithWait makes a copy that arrives while the first call runs wait up to d
// (not negative) and replay its answer, instead of getting Aborted at once.
// Default: 0 (Aborted).
func WithWait(d time.Duration) Option {
	return func(c *config) { c.UseIdem(fmt.Sprintf("idemgrpc.WithWait(%v)", d), idem.WithWait(d)) }
}

// WithMaxRequestSize caps the encoded request message, which is marshalled
// whole to fingerprint it; a larger one is refused with ResourceExhausted
// (what gRPC answers for a message over its own limit) and the handler does
// not run. It must be positive. Default: 1 MiB ([DefaultMaxRequestSize]).
func WithMaxRequestSize(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.Reject(fmt.Sprintf("idemgrpc.WithMaxRequestSize(%d)", n), fmt.Errorf("%w: the cap must be positive", idem.ErrInvalid))
			return
		}
		c.maxRequest = n
	}
}

// WithMaxResponseSize caps the recorded answer (the encoded response or
// status plus the handler's metadata); it must be positive. Default: 1 MiB
// ([DefaultMaxResponseSize]). A larger answer reaches its caller in full but
// is never replayed: the call is recorded as done, and copies get Internal
// with reason RESPONSE_NOT_RETAINED rather than a second run.
func WithMaxResponseSize(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.Reject(fmt.Sprintf("idemgrpc.WithMaxResponseSize(%d)", n), fmt.Errorf("%w: the cap must be positive", idem.ErrInvalid))
			return
		}
		c.maxResponse = n
	}
}

// WithLogger sets the logger of the errors no caller can be told of (an
// answer that could not be recorded, a claim that could not be released, a
// handler's panic with its stack). Keys, principals and messages are never
// logged. Default: slog.Default(), looked up at each record.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}
