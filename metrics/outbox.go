package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchkey-go/latchkey/outbox"
)

// outboxReadTimeout bounds one outbox's read at a scrape.
const outboxReadTimeout = 5 * time.Second

// Outbox exports outboxes to Prometheus: how many messages wait
// for the relay and how long the oldest has waited, read from the database
// at each scrape, so the lag is seen even when no relay runs.
//
//	c := metrics.NewOutbox()
//	c.Add("payments", ob) // a fixed name per outbox
//	reg.MustRegister(c)
//
// Its metrics, labelled with the outbox's name:
//
//	latchkey_outbox_pending_messages{outbox}             gauge
//	latchkey_outbox_oldest_pending_age_seconds{outbox}   gauge, 0 when none is pending, by the database's clock
//	latchkey_outbox_published_messages{outbox}           gauge, kept until the retention passes
//	latchkey_outbox_relay_token{outbox}                  gauge, the last relay term that wrote (0: none yet)
//	latchkey_outbox_read_errors_total{outbox}            counter, scrapes whose read failed
//
// The alert on the age is in deploy/prometheus/outbox.rules.yml.
//
// It is a prometheus.Collector, safe for concurrent use.
type Outbox struct {
	pending, age, published, token *prometheus.Desc
	errors                         *prometheus.CounterVec

	mu       sync.Mutex
	outboxes map[string]*outbox.Outbox // guarded by mu
}

var _ prometheus.Collector = (*Outbox)(nil)

// NewOutbox returns a collector of no outbox yet.
func NewOutbox() *Outbox {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "outbox", name), help, []string{"outbox"}, nil)
	}
	return &Outbox{
		pending:   desc("pending_messages", "Committed outbox messages not yet published."),
		age:       desc("oldest_pending_age_seconds", "How long the oldest pending outbox message has waited, by the database's clock; 0 when none is pending."),
		published: desc("published_messages", "Published outbox messages kept until the retention passes."),
		token:     desc("relay_token", "The fencing token of the last relay term that marked or purged; 0 if none has."),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "outbox", Name: "read_errors_total",
			Help: "Scrapes whose read of the outbox failed.",
		}, []string{"outbox"}),
		outboxes: map[string]*outbox.Outbox{},
	}
}

// Add reports o under the label outbox="name", replacing an outbox of the
// same name; a nil o stops reporting name.
func (c *Outbox) Add(name string, o *outbox.Outbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o == nil {
		delete(c.outboxes, name)
		return
	}
	c.outboxes[name] = o
}

// Describe implements prometheus.Collector.
func (c *Outbox) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.age, c.published, c.token} {
		ch <- d
	}
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector: it reads each outbox's Stats,
// each bounded by 5 s. An outbox whose read fails reports no gauges and
// counts an error.
func (c *Outbox) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	obs := make(map[string]*outbox.Outbox, len(c.outboxes))
	for k, v := range c.outboxes {
		obs[k] = v
	}
	c.mu.Unlock()
	for name, o := range obs {
		c.collect(ch, name, o)
	}
	c.errors.Collect(ch)
}

func (c *Outbox) collect(ch chan<- prometheus.Metric, name string, o *outbox.Outbox) {
	ctx, cancel := context.WithTimeout(context.Background(), outboxReadTimeout)
	defer cancel()
	s, err := o.Stats(ctx)
	if err != nil {
		c.errors.WithLabelValues(name).Inc()
		return
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.Pending), name)
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, s.Lag.Seconds(), name)
	ch <- prometheus.MustNewConstMetric(c.published, prometheus.GaugeValue, float64(s.Published), name)
	ch <- prometheus.MustNewConstMetric(c.token, prometheus.GaugeValue, float64(s.Token), name)
}
