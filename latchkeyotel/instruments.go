package latchkeyotel

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// durationBuckets are the duration histograms' bounds, in seconds: those
// of the metrics package, from a loopback round trip to the default lease.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// instruments are the metrics a Telemetry records.
type instruments struct {
	acquire, wait, hold metric.Float64Histogram
	lost                metric.Int64Counter
	idemN               metric.Int64Counter
	idemD               metric.Float64Histogram
	dedupN              metric.Int64Counter
	dedupD              metric.Float64Histogram
	fence, state        metric.Int64Counter
}

func (in *instruments) init(m metric.Meter) error {
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		errs = append(errs, err)
		return h
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	in.acquire = hist("latchkey.lock.acquire.duration", "Duration of lock Acquire calls.")
	in.wait = hist("latchkey.lock.wait.duration", "Time Acquire calls spent waiting for another holder.")
	in.hold = hist("latchkey.lock.hold.duration", "How long leases were held, to their Release or loss.")
	in.lost = count("latchkey.lock.leases_lost", "{lease}", "Leases lost before Release.")
	in.idemN = count("latchkey.idem.requests", "{request}", "Idempotency-guarded requests and idem.Do calls.")
	in.idemD = hist("latchkey.idem.duration", "Time guarded requests and idem.Do calls took, replays and waits included.")
	in.dedupN = count("latchkey.dedup.messages", "{message}", "Deliveries handled by a deduplicating consumer.")
	in.dedupD = hist("latchkey.dedup.duration", "Time a delivery took, from the claim to its Done or Release.")
	in.fence = count("latchkey.fence.refused", "{write}", "Fenced writes refused for a stale token.")
	in.state = count("latchkey.state.refused", "{change}", "State transitions and optimistic updates not applied.")
	return errors.Join(errs...)
}

// attrs is one attribute set as the options of the metric calls, built
// once: passing a prepared slice to a variadic call allocates nothing,
// where a fresh option would, on every measurement.
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newAttrs(set attribute.Set) attrs {
	o := metric.WithAttributeSet(set)
	return attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}
