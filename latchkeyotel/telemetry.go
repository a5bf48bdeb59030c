package latchkeyotel

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/internal/options"
)

// ErrInvalid is wrapped by the error of New given a bad option.
var ErrInvalid = errors.New("latchkeyotel: invalid argument")

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/latchkey-go/latchkey/latchkeyotel"

// A Telemetry makes the spans and metrics of every observer it hands out.
// It is safe for concurrent use; one serves a whole program.
type Telemetry struct {
	tracer   trace.Tracer
	keySalt  []byte // nil: no key hash
	inst     instruments
	leaseSet leases
}

// An Option configures New.
type Option func(*config)

type config struct {
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	keySalt []byte
	invalid error
}

// WithTracerProvider sets where spans go. Default: otel.GetTracerProvider(),
// looked up when New runs.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets where metrics go. Default: otel.GetMeterProvider(),
// looked up when New runs.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithHashedKeys adds the attribute latchkey.lock.key_hash to lock spans:
// the first 16 hex digits of HMAC-SHA256(secret, key). With a secret of at
// least 16 bytes kept out of the traces, a hash tells whether two spans are
// about one key and cannot be turned back into the key, nor guessed from a
// list of likely account ids. It is never a metric attribute. Default: no
// key in any form.
func WithHashedKeys(secret []byte) Option {
	return func(c *config) {
		if len(secret) < 16 {
			c.invalid = fmt.Errorf("%w: the key-hash secret has %d bytes, want at least 16", ErrInvalid, len(secret))
			return
		}
		c.keySalt = append([]byte(nil), secret...)
	}
}

// New returns a Telemetry. Errors: ErrInvalid for a bad option, or the
// meter provider's error creating an instrument.
func New(opts ...Option) (*Telemetry, error) {
	var c config
	options.Apply(&c, opts)
	if c.invalid != nil {
		return nil, c.invalid
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	t := &Telemetry{tracer: c.tp.Tracer(ScopeName), keySalt: c.keySalt}
	if err := t.inst.init(c.mp.Meter(ScopeName)); err != nil {
		return nil, err
	}
	return t, nil
}

// keyHash returns the key-hash attribute of key, and false without
// WithHashedKeys.
func (t *Telemetry) keyHash(key string) (attribute.KeyValue, bool) {
	if t.keySalt == nil {
		return attribute.KeyValue{}, false
	}
	m := hmac.New(sha256.New, t.keySalt)
	m.Write([]byte(key))
	return attrKeyHash.String(hex.EncodeToString(m.Sum(nil)[:8])), true
}

// Server returns the standard attributes of the server a backend or store
// talks to: db.system.name (such as "redis", "postgresql", "etcd") and
// server.address (host or host:port, never a URL with credentials). Empty
// values are left out.
func Server(dbSystem, address string) []attribute.KeyValue {
	var kv []attribute.KeyValue
	if dbSystem != "" {
		kv = append(kv, attrDBSystem.String(dbSystem))
	}
	if address != "" {
		kv = append(kv, attrServerAddress.String(address))
	}
	return kv
}
