package metrics

import (
	"context"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// Idem is a prometheus.Collector for idemhttp middlewares and idem.Do calls.
// Register it once and pass Observer(handler) to each middleware with
// idemhttp.WithObserver, and DoObserver(name) to idem.Do with
// idem.WithObserver. Its metrics, each labelled with the handler's or
// operation's name:
//
//	latchkey_idem_requests_total{handler,outcome}            counter
//	latchkey_idem_request_duration_seconds{handler,outcome}  histogram
//	latchkey_idem_store_errors_total{handler,operation}      counter: claim, record, release, read
//	latchkey_idem_replay_age_seconds{handler}                histogram, how old replayed responses were (middleware only)
//
// For a middleware, outcome is one of idemhttp's outcomes: executed,
// released, replayed, conflict (409), mismatch (422), bad_key (400),
// bad_body (413/400), store_error (503), unkeyed, canceled. For idem.Do, one
// of idem's: executed, released, kept, replayed, conflict, mismatch,
// invalid, store_error, canceled.
type Idem struct {
	vecs
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	storeErrs *prometheus.CounterVec
	replayAge *prometheus.HistogramVec
}

var _ prometheus.Collector = (*Idem)(nil)

// NewIdem returns an Idem collector. It fails with ErrInvalid on a bad
// option.
func NewIdem(opts ...Option) (*Idem, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	m := &Idem{
		requests: c.counter("idem", "requests_total",
			"Requests guarded by the idempotency middleware, and idem.Do calls, by outcome.", "handler", "outcome"),
		duration: c.histogram("idem", "request_duration_seconds",
			"Time guarded requests spent in the idempotency middleware (handler included), and idem.Do calls took, by outcome.", c.buckets, "handler", "outcome"),
		storeErrs: c.counter("idem", "store_errors_total",
			"Idempotency store failures, by operation: claim (request answered 503), record, release, read (a stored response).", "handler", "operation"),
	}
	m.replayAge = c.histogram("idem", "replay_age_seconds",
		"How long ago the responses the middleware replayed were recorded (records without a time are not counted).", AgeBuckets, "handler")
	m.vecs = vecs{m.requests, m.duration, m.storeErrs, m.replayAge}
	return m, nil
}

// idemOutcomes are the outcomes resolved up front, indexed by their value.
var idemOutcomes = [...]idemhttp.Outcome{
	idemhttp.OutcomeExecuted, idemhttp.OutcomeReleased, idemhttp.OutcomeReplayed,
	idemhttp.OutcomeConflict, idemhttp.OutcomeMismatch, idemhttp.OutcomeBadKey,
	idemhttp.OutcomeBadBody, idemhttp.OutcomeStoreError, idemhttp.OutcomeUnkeyed,
	idemhttp.OutcomeCanceled,
}

// Observer returns the idemhttp.Observer that records one middleware's
// requests under the label handler="name" (a fixed name such as "pay", never
// a path with ids in it).
func (m *Idem) Observer(handler string) idemhttp.Observer {
	count := byOutcome(m.requests, m.duration, handler, idemOutcomes[:])
	errs := map[idemhttp.Outcome]prometheus.Counter{
		idemhttp.OutcomeStoreError: m.storeErrs.WithLabelValues(handler, "claim"),
		idemhttp.OutcomeExecuted:   m.storeErrs.WithLabelValues(handler, "record"),
		idemhttp.OutcomeReleased:   m.storeErrs.WithLabelValues(handler, "release"),
		idemhttp.OutcomeReplayed:   m.storeErrs.WithLabelValues(handler, "read"),
	}
	age := m.replayAge.WithLabelValues(handler)
	return func(_ *http.Request, e idemhttp.Event) {
		count(e.Outcome, e.Duration)
		if e.Outcome == idemhttp.OutcomeReplayed && e.Age > 0 {
			age.Observe(e.Age.Seconds())
		}
		if e.Err != nil {
			if c, ok := errs[e.Outcome]; ok {
				c.Inc()
			}
		}
	}
}

// DoObserver returns the idem.Observer that records the idem.Do calls made
// with it under the label handler="name" (a fixed name such as "charge").
// A claim the store failed counts as a store error of operation claim, and a
// result that could not be recorded (idem.ErrNotRecorded) as one of
// operation record.
func (m *Idem) DoObserver(name string) idem.Observer {
	count := byOutcome(m.requests, m.duration, name, doOutcomes[:])
	claimErrs := m.storeErrs.WithLabelValues(name, "claim")
	recordErrs := m.storeErrs.WithLabelValues(name, "record")
	return func(_ context.Context, e idem.Event) {
		count(e.Outcome, e.Duration)
		switch {
		case e.Outcome == idem.OutcomeStoreError:
			claimErrs.Inc()
		case errors.Is(e.Err, idem.ErrNotRecorded):
			recordErrs.Inc()
		}
	}
}

// doOutcomes are idem.Do's outcomes, resolved up front.
var doOutcomes = [...]idem.Outcome{
	idem.OutcomeExecuted, idem.OutcomeReleased, idem.OutcomeKept, idem.OutcomeReplayed,
	idem.OutcomeConflict, idem.OutcomeMismatch, idem.OutcomeInvalid, idem.OutcomeStoreError,
	idem.OutcomeCanceled,
}

// Describe implements prometheus.Collector.
func (m *Idem) Describe(ch chan<- *prometheus.Desc) { m.vecs.Describe(ch) }

// Collect implements prometheus.Collector.
func (m *Idem) Collect(ch chan<- prometheus.Metric) { m.vecs.Collect(ch) }
