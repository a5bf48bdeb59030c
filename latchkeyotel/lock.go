package latchkeyotel

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/lock"
)

// leases maps each held lease to the span of its holding.
type leases struct{ m sync.Map } // *lock.Lease -> trace.Span

// LockObserver returns the lock.Observer of one backend, named backend (a
// fixed name such as "redis" or "etcd", never a key); server's attributes
// (see Server) are added to its spans and metrics. Pass it to the Locker's
// SetObserver, alone or with the metrics package's through lock.Observers.
func (t *Telemetry) LockObserver(backend string, server ...attribute.KeyValue) lock.Observer {
	base := append([]attribute.KeyValue{attrBackend.String(backend)}, server...)
	o := &lockObserver{t: t, base: base}
	for _, out := range lockOutcomes {
		o.outSets = append(o.outSets, metric.WithAttributeSet(attribute.NewSet(append(slices.Clip(base), attrLockOut.String(out))...)))
	}
	o.released = metric.WithAttributeSet(attribute.NewSet(append(slices.Clip(base), attrLeaseEnd.String("released"))...))
	o.lostEnd = metric.WithAttributeSet(attribute.NewSet(append(slices.Clip(base), attrLeaseEnd.String("lost"))...))
	return o.observe
}

type lockObserver struct {
	t                 *Telemetry
	base              []attribute.KeyValue
	outSets           []metric.MeasurementOption // by lockOutcome
	released, lostEnd metric.MeasurementOption
}

// lockOutcomes are the values of latchkey.lock.outcome, as the metrics
// package names them.
var lockOutcomes = [...]string{"acquired", "not_acquired", "canceled", "invalid", "error"}

func lockOutcome(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, lock.ErrNotAcquired):
		return 1
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 2
	case errors.Is(err, lock.ErrInvalid):
		return 3
	}
	return 4
}

func (o *lockObserver) observe(e lock.Event) {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	switch e.Kind {
	case lock.EventAcquire:
		o.acquired(ctx, e)
	case lock.EventRenew:
		if e.Err != nil {
			if s, ok := o.t.leaseSet.m.Load(e.Lease); ok {
				s.(trace.Span).AddEvent("latchkey.lock.renewal_failed",
					trace.WithAttributes(attrErrorType.String(renewError(e.Err))))
			}
		}
	case lock.EventLoss:
		o.t.inst.lost.Add(ctx, 1, metric.WithAttributes(append(slices.Clip(o.base), attrLossReason.String(string(e.Reason)))...))
		o.t.inst.hold.Record(ctx, e.Held.Seconds(), o.lostEnd)
		if s, ok := o.t.leaseSet.m.LoadAndDelete(e.Lease); ok {
			span := s.(trace.Span)
			span.AddEvent("latchkey.lock.lease_lost", trace.WithAttributes(attrLossReason.String(string(e.Reason))))
			span.SetAttributes(attrHeld.Float64(e.Held.Seconds()), attrLeaseEnd.String("lost"))
			span.SetStatus(codes.Error, "lease lost: "+string(e.Reason))
			span.End()
		}
	case lock.EventRelease:
		o.t.inst.hold.Record(ctx, e.Held.Seconds(), o.released)
		if s, ok := o.t.leaseSet.m.LoadAndDelete(e.Lease); ok {
			span := s.(trace.Span)
			span.SetAttributes(attrHeld.Float64(e.Held.Seconds()), attrLeaseEnd.String("released"))
			span.End()
		}
		end := time.Now()
		_, span := o.t.tracer.Start(ctx, "latchkey.lock.release", trace.WithTimestamp(end.Add(-e.Duration)),
			trace.WithAttributes(o.base...))
		if e.Err != nil {
			span.SetStatus(codes.Error, "release failed; the lock expires after its TTL")
			span.SetAttributes(attrErrorType.String("release_failed"))
		}
		span.End(trace.WithTimestamp(end))
	}
}

func (o *lockObserver) acquired(ctx context.Context, e lock.Event) {
	i := lockOutcome(e.Err)
	o.t.inst.acquire.Record(ctx, e.Duration.Seconds(), o.outSets[i])
	o.t.inst.wait.Record(ctx, e.Waited.Seconds(), o.outSets[i])

	end := time.Now()
	attrs := append(slices.Clip(o.base),
		attrLockOut.String(lockOutcomes[i]), attrAcquired.Bool(e.Err == nil),
		attrWaited.Float64(e.Waited.Seconds()), attrAttempts.Int(e.Attempts))
	if kh, ok := o.t.keyHash(e.Key); ok {
		attrs = append(attrs, kh)
	}
	_, span := o.t.tracer.Start(ctx, "latchkey.lock.acquire", trace.WithTimestamp(end.Add(-e.Duration)),
		trace.WithAttributes(attrs...))
	if i >= 3 { // invalid or a backend's error; not acquiring is an answer
		span.SetStatus(codes.Error, "acquire failed: "+lockOutcomes[i])
		span.SetAttributes(attrErrorType.String(lockOutcomes[i]))
	}
	span.End(trace.WithTimestamp(end))
	if e.Err != nil || e.Lease == nil {
		return
	}
	held := append(slices.Clip(o.base), attrAttempts.Int(e.Attempts))
	if kh, ok := o.t.keyHash(e.Key); ok {
		held = append(held, kh)
	}
	_, hs := o.t.tracer.Start(ctx, "latchkey.lock.held", trace.WithTimestamp(end), trace.WithAttributes(held...))
	o.t.leaseSet.m.Store(e.Lease, hs)
}

// renewError classifies a failed renewal for the error.type attribute,
// without its text (which may name the key).
func renewError(err error) string {
	if errors.Is(err, lock.ErrNotHeld) {
		return "refused"
	}
	return "unconfirmed"
}
