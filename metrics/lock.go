package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchkey-go/latchkey/internal/lockoutcome"
	"github.com/latchkey-go/latchkey/lock"
)

// Lock is a prometheus.Collector for the leases of any number of Lockers.
// Register it once and plug Observer(backend) into each Locker (every
// backend's Locker has SetObserver). Its metrics, each labelled with the
// backend name:
//
//	latchkey_lock_acquire_duration_seconds{backend,outcome}  histogram, whole Acquire calls
//	latchkey_lock_acquire_wait_seconds{backend,outcome}      histogram, time spent waiting for another holder
//	latchkey_lock_leases_held{backend}                       gauge, leases held now
//	latchkey_lock_renewals_total{backend,result}             counter: ok, failed (retried), refused
//	latchkey_lock_leases_lost_total{backend,reason}          counter: renewal_refused, renewal_unconfirmed, expired
//	latchkey_lock_releases_total{backend,result}             counter: ok, error
//	latchkey_lock_hold_seconds{backend,end}                  histogram, how long leases were held: end released or lost
//
// outcome is acquired, not_acquired, canceled (ctx done), invalid or error.
type Lock struct {
	vecs
	acquire *prometheus.HistogramVec
	wait    *prometheus.HistogramVec
	held    *prometheus.GaugeVec
	renew   *prometheus.CounterVec
	lost    *prometheus.CounterVec
	release *prometheus.CounterVec
	hold    *prometheus.HistogramVec
}

var _ prometheus.Collector = (*Lock)(nil)

// NewLock returns a Lock collector. It fails with ErrInvalid on a bad option.
func NewLock(opts ...Option) (*Lock, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	l := &Lock{
		acquire: c.histogram("lock", "acquire_duration_seconds",
			"Duration of lock Acquire calls, by outcome.", c.buckets, "backend", "outcome"),
		wait: c.histogram("lock", "acquire_wait_seconds",
			"Time Acquire calls spent waiting for another holder (0 when the first attempt decided), by outcome.", c.buckets, "backend", "outcome"),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "lock", Name: "leases_held",
			Help: "Leases held now.", ConstLabels: c.constLabels,
		}, []string{"backend"}),
		renew: c.counter("lock", "renewals_total",
			"Lease renewals, by result: ok, failed (retried until the lease's deadline) or refused (the lease is lost).", "backend", "result"),
		lost: c.counter("lock", "leases_lost_total",
			"Leases lost before Release, by reason.", "backend", "reason"),
		release: c.counter("lock", "releases_total",
			"Release calls that ended a held lease, by result.", "backend", "result"),
	}
	l.hold = c.histogram("lock", "hold_seconds",
		"How long leases were held, from acquisition to Release (end=released) or loss (end=lost).", c.buckets, "backend", "end")
	l.vecs = vecs{l.acquire, l.wait, l.held, l.renew, l.lost, l.release, l.hold}
	return l, nil
}

// Observer returns the lock.Observer that records the events of one backend
// under the label backend="name" (a fixed name such as "redis" or "etcd",
// never a key). Pass it to the Locker's SetObserver, alone or with others
// through lock.Observers.
func (l *Lock) Observer(backend string) lock.Observer {
	o := &lockObserver{
		held:       l.held.WithLabelValues(backend),
		renewOK:    l.renew.WithLabelValues(backend, "ok"),
		renewFail:  l.renew.WithLabelValues(backend, "failed"),
		renewRefus: l.renew.WithLabelValues(backend, "refused"),
		releaseOK:  l.release.WithLabelValues(backend, "ok"),
		releaseErr: l.release.WithLabelValues(backend, "error"),
		lost: map[lock.LossReason]prometheus.Counter{
			lock.LossRefused:     l.lost.WithLabelValues(backend, string(lock.LossRefused)),
			lock.LossUnconfirmed: l.lost.WithLabelValues(backend, string(lock.LossUnconfirmed)),
			lock.LossExpired:     l.lost.WithLabelValues(backend, string(lock.LossExpired)),
		},
		lostVec: l.lost, backend: backend,
		holdReleased: l.hold.WithLabelValues(backend, "released"),
		holdLost:     l.hold.WithLabelValues(backend, "lost"),
	}
	for i, out := range lockoutcome.Names {
		o.acquire[i] = l.acquire.WithLabelValues(backend, out)
		o.wait[i] = l.wait.WithLabelValues(backend, out)
	}
	return o.observe
}

// lockObserver holds one backend's metrics, resolved once.
type lockObserver struct {
	acquire, wait                  [len(lockoutcome.Names)]prometheus.Observer
	held                           prometheus.Gauge
	renewOK, renewFail, renewRefus prometheus.Counter
	releaseOK, releaseErr          prometheus.Counter
	lost                           map[lock.LossReason]prometheus.Counter // read only
	lostVec                        *prometheus.CounterVec
	backend                        string
	holdReleased, holdLost         prometheus.Observer
}

func (o *lockObserver) observe(e lock.Event) {
	switch e.Kind {
	case lock.EventAcquire:
		i := lockoutcome.Of(e.Err)
		o.acquire[i].Observe(e.Duration.Seconds())
		o.wait[i].Observe(e.Waited.Seconds())
		if e.Err == nil {
			o.held.Inc()
		}
	case lock.EventRenew:
		switch {
		case e.Err == nil:
			o.renewOK.Inc()
		case errors.Is(e.Err, lock.ErrNotHeld):
			o.renewRefus.Inc()
		default:
			o.renewFail.Inc()
		}
	case lock.EventLoss:
		o.held.Dec()
		o.holdLost.Observe(e.Held.Seconds())
		c, ok := o.lost[e.Reason]
		if !ok {
			c = o.lostVec.WithLabelValues(o.backend, fmt.Sprint(e.Reason))
		}
		c.Inc()
	case lock.EventRelease:
		o.held.Dec()
		o.holdReleased.Observe(e.Held.Seconds())
		if e.Err == nil {
			o.releaseOK.Inc()
		} else {
			o.releaseErr.Inc()
		}
	}
}

// Describe implements prometheus.Collector.
func (l *Lock) Describe(ch chan<- *prometheus.Desc) { l.vecs.Describe(ch) }

// Collect implements prometheus.Collector.
func (l *Lock) Collect(ch chan<- prometheus.Metric) { l.vecs.Collect(ch) }
