package metrics

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchkey-go/latchkey/internal/options"
)

// ErrInvalid is wrapped by the error of a constructor given an invalid option.
var ErrInvalid = errors.New("metrics: invalid argument")

// Namespace prefixes every metric name.
const Namespace = "latchkey"

// DefaultBuckets are the duration histograms' upper bounds, in seconds: from
// 100 µs (a loopback round trip) to 30 s (the default lease).
var DefaultBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// AgeBuckets are the replay-age histogram's upper bounds, in seconds: from
// a client's quick retry (100 ms) to the default retention (24 h).
var AgeBuckets = []float64{.1, 1, 5, 30, 60, 300, 900, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600}

// An Option configures a collector.
type Option func(*config)

type config struct {
	buckets     []float64
	constLabels prometheus.Labels
	invalid     error
}

func newConfig(opts []Option) (config, error) {
	c := config{buckets: DefaultBuckets}
	options.Apply(&c, opts)
	return c, c.invalid
}

// WithBuckets sets the duration histograms' bucket upper bounds, in seconds:
// at least one, finite, positive and increasing. Default: DefaultBuckets.
func WithBuckets(b []float64) Option {
	return func(c *config) {
		if len(b) == 0 {
			c.invalid = fmt.Errorf("%w: no buckets", ErrInvalid)
			return
		}
		for i, v := range b {
			if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) || (i > 0 && v <= b[i-1]) {
				c.invalid = fmt.Errorf("%w: bucket bounds must be finite, positive and increasing: %v", ErrInvalid, b)
				return
			}
		}
		c.buckets = append([]float64(nil), b...)
	}
}

// WithConstLabels adds labels with fixed values to every metric of the
// collector, for instance the service or instance name. Default: none. Keep
// them few and their values bounded.
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.constLabels = l }
}

// counter returns the counter vector latchkey_<subsystem>_<name>, with the
// collector's constant labels and the variable labels labels.
func (c config) counter(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, ConstLabels: c.constLabels,
	}, labels)
}

// histogram returns the histogram vector latchkey_<subsystem>_<name> with
// bucket upper bounds buckets, the collector's constant labels and the
// variable labels labels.
func (c config) histogram(subsystem, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
		Buckets: buckets, ConstLabels: c.constLabels,
	}, labels)
}

// vecs is a set of metric vectors that together make one collector.
type vecs []prometheus.Collector

func (v vecs) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range v {
		c.Describe(ch)
	}
}

func (v vecs) Collect(ch chan<- prometheus.Metric) {
	for _, c := range v {
		c.Collect(ch)
	}
}

// byOutcome returns a function that counts one event of an outcome in n and
// observes its duration in d, both labelled (label, outcome). The series of
// the known outcomes are resolved up front; any other on its first use.
func byOutcome[O interface {
	comparable
	String() string
}](n *prometheus.CounterVec, d *prometheus.HistogramVec, label string, known []O) func(o O, took time.Duration) {
	type pair struct {
		n prometheus.Counter
		d prometheus.Observer
	}
	resolve := func(o O) pair {
		return pair{n.WithLabelValues(label, o.String()), d.WithLabelValues(label, o.String())}
	}
	by := make(map[O]pair, len(known))
	for _, o := range known {
		by[o] = resolve(o)
	}
	return func(o O, took time.Duration) {
		p, ok := by[o]
		if !ok {
			p = resolve(o)
		}
		p.n.Inc()
		p.d.Observe(took.Seconds())
	}
}
