package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchkey-go/latchkey/dedup"
)

// Dedup is a prometheus.Collector for message deduplication. Register it
// once, pass Observer(consumer) to each dedup.Deduper with
// dedup.WithObserver, and hand it the fill ratio of each Bloom prefilter with
// BloomFill. Its metrics, each labelled with the consumer name:
//
//	latchkey_dedup_messages_total{consumer,outcome}               counter: processed, duplicate, busy, failed, rejected
//	latchkey_dedup_processing_duration_seconds{consumer,outcome}  histogram
//	latchkey_dedup_claims_released_total{consumer}                counter, claims given back after a handler error
//	latchkey_dedup_store_errors_total{consumer,operation}         counter: done (processed, not marked done), release
//	latchkey_dedup_bloom_fill_ratio{filter}                       gauge, set bits / all bits, read at each scrape
//
// Duplicates dropped are messages_total{outcome="duplicate"}.
type Dedup struct {
	vecs
	messages  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	released  *prometheus.CounterVec
	storeErrs *prometheus.CounterVec
	fillDesc  *prometheus.Desc

	mu    sync.Mutex
	fills map[string]func() float64 // guarded by mu
}

var _ prometheus.Collector = (*Dedup)(nil)

// NewDedup returns a Dedup collector. It fails with ErrInvalid on a bad
// option.
func NewDedup(opts ...Option) (*Dedup, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	m := &Dedup{
		messages: c.counter("dedup", "messages_total",
			"Deliveries handled by the deduplicator, by outcome (duplicate: dropped without running the handler).", "consumer", "outcome"),
		duration: c.histogram("dedup", "processing_duration_seconds",
			"Time deliveries spent in the deduplicator (claim, handler, done or release), by outcome.", c.buckets, "consumer", "outcome"),
		released: c.counter("dedup", "claims_released_total",
			"Claims released after a handler error, so that the redelivery is processed.", "consumer"),
		storeErrs: c.counter("dedup", "store_errors_total",
			"Failures of the step after the handler, by operation: done (processed but not marked done) or release.", "consumer", "operation"),
		fillDesc: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "dedup", "bloom_fill_ratio"),
			"Fraction of a Bloom prefilter's bits that are set; its false-positive rate grows with it.",
			[]string{"filter"}, c.constLabels),
		fills: map[string]func() float64{},
	}
	m.vecs = vecs{m.messages, m.duration, m.released, m.storeErrs}
	return m, nil
}

// Describe implements prometheus.Collector.
func (m *Dedup) Describe(ch chan<- *prometheus.Desc) {
	m.vecs.Describe(ch)
	ch <- m.fillDesc
}

// Collect implements prometheus.Collector. It calls the BloomFill functions.
func (m *Dedup) Collect(ch chan<- prometheus.Metric) {
	m.vecs.Collect(ch)
	m.mu.Lock()
	fills := make(map[string]func() float64, len(m.fills))
	for k, f := range m.fills {
		fills[k] = f
	}
	m.mu.Unlock()
	for name, f := range fills {
		ch <- prometheus.MustNewConstMetric(m.fillDesc, prometheus.GaugeValue, f(), name)
	}
}

// BloomFill reports the fill ratio of the Bloom prefilter named filter (a
// fixed name) as latchkey_dedup_bloom_fill_ratio{filter="..."}: fill is
// called at each scrape and returns the fraction of set bits, in [0, 1]. It
// is a plain function so that any filter fits without this package importing
// it. A nil fill stops reporting filter.
func (m *Dedup) BloomFill(filter string, fill func() float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fill == nil {
		delete(m.fills, filter)
		return
	}
	m.fills[filter] = fill
}

// dedupOutcomes are the outcomes resolved up front.
var dedupOutcomes = [...]dedup.Outcome{dedup.OutcomeProcessed, dedup.OutcomeDuplicate, dedup.OutcomeBusy, dedup.OutcomeFailed, dedup.OutcomeRejected}

// Observer returns the dedup.Observer that records one consumer's deliveries
// under the label consumer="name" (a fixed name such as the queue's, never a
// message id).
func (m *Dedup) Observer(consumer string) dedup.Observer {
	count := byOutcome(m.messages, m.duration, consumer, dedupOutcomes[:])
	released := m.released.WithLabelValues(consumer)
	doneErr := m.storeErrs.WithLabelValues(consumer, "done")
	releaseErr := m.storeErrs.WithLabelValues(consumer, "release")
	return func(_ context.Context, e dedup.Event) {
		count(e.Outcome, e.Duration)
		switch {
		case e.Outcome == dedup.OutcomeFailed && e.StoreErr == nil:
			released.Inc()
		case e.Outcome == dedup.OutcomeFailed:
			releaseErr.Inc()
		case e.Outcome == dedup.OutcomeProcessed && e.StoreErr != nil:
			doneErr.Inc()
		}
	}
}
