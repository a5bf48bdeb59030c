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

	"github.com/latchkey-go/latchkey/internal/lockoutcome"
	"github.com/latchkey-go/latchkey/lock"
)

// leases maps each held lease to its span, open until the lease ends, or,
// for the moment between a lease's loss and the report of its acquisition,
// to how it ended.
type leases struct{ m sync.Map } // *lock.Lease -> trace.Span or leaseEnd

func isSpan(v any) bool { _, ok := v.(trace.Span); return ok }

// LockObserver returns the lock.Observer of one backend, named backend (a
// fixed name such as "redis" or "etcd", never a key); server's attributes
// (see Server) are added to its spans and metrics. Pass it to the Locker's
// SetObserver, alone or with the metrics package's through lock.Observers.
//
// Each Acquire call is one span, latchkey.lock, under the span of
// Acquire's context, with the outcome (latchkey.lock.outcome: acquired,
// not_acquired, canceled, invalid, error), the time spent waiting for
// another holder and the attempts. It starts when Acquire was called; a
// call that did not acquire ends it at once. A held lease keeps it open
// until the lease ends: at Release (latchkey.lock.end released; status
// Error if the release failed) or at its loss (end lost, an event
// latchkey.lock.lease_lost with the reason, status Error). The span's
// length is the wait plus the hold; latchkey.lock.wait.duration and
// latchkey.lock.hold.duration split it. One span per lock pair, with no
// events on the way of a healthy lease, keeps tracing a lock pair cheap
// (see the cost table in docs/observability.md).
func (t *Telemetry) LockObserver(backend string, server ...attribute.KeyValue) lock.Observer {
	base := append([]attribute.KeyValue{attrBackend.String(backend)}, server...)
	o := &lockObserver{t: t, base: base}
	for i, out := range lockoutcome.Names {
		kv := append(slices.Clip(base), attrLockOut.String(out))
		o.outSets[i] = newAttrs(attribute.NewSet(kv...))
		o.outStart[i] = trace.WithAttributes(kv...)
	}
	o.released = newAttrs(attribute.NewSet(append(slices.Clip(base), attrLeaseEnd.String("released"))...))
	o.lostEnd = newAttrs(attribute.NewSet(append(slices.Clip(base), attrLeaseEnd.String("lost"))...))
	return o.observe
}

type lockObserver struct {
	t                 *Telemetry
	base              []attribute.KeyValue
	outSets           [len(lockoutcome.Names)]attrs                 // by lockoutcome.Of
	outStart          [len(lockoutcome.Names)]trace.SpanStartOption // span attributes, by lockoutcome.Of
	released, lostEnd attrs
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
			if s, ok := o.t.leaseSet.m.Load(e.Lease); ok && isSpan(s) {
				s.(trace.Span).AddEvent("latchkey.lock.renewal_failed",
					trace.WithAttributes(attrErrorType.String(renewError(e.Err))))
			}
		}
	case lock.EventLoss:
		o.t.inst.lost.Add(ctx, 1, metric.WithAttributes(append(slices.Clip(o.base), attrLossReason.String(string(e.Reason)))...))
		o.t.inst.hold.Record(ctx, e.Held.Seconds(), o.lostEnd.rec...)
		o.t.leaseSet.end(e.Lease, leaseEnd{held: e.Held, lost: e.Reason})
	case lock.EventRelease:
		o.t.inst.hold.Record(ctx, e.Held.Seconds(), o.released.rec...)
		o.t.leaseSet.end(e.Lease, leaseEnd{held: e.Held, failed: e.Err != nil})
	}
}

// A leaseEnd is how a lease ended, for its span.
type leaseEnd struct {
	held   time.Duration
	lost   lock.LossReason // "" when released
	failed bool            // the release failed
}

// start records the open span of a lease that was acquired. If the lease
// has ended already (it was lost before its acquisition was told, which a
// very short lease can be), the span ends now.
func (ls *leases) start(l *lock.Lease, span trace.Span) {
	if v, ended := ls.m.LoadOrStore(l, span); ended {
		ls.m.Delete(l)
		v.(leaseEnd).finish(span)
	}
}

// end ends the span of a lease, or, if its acquisition has not been told
// yet, leaves the ending for start. Loading or storing in one step on both
// sides leaves no moment in which either misses the other.
func (ls *leases) end(l *lock.Lease, e leaseEnd) {
	if v, started := ls.m.LoadOrStore(l, e); started {
		ls.m.Delete(l)
		e.finish(v.(trace.Span))
	}
}

func (e leaseEnd) finish(span trace.Span) {
	span.SetAttributes(attrHeld.Float64(e.held.Seconds()))
	switch {
	case e.lost != "":
		span.AddEvent("latchkey.lock.lease_lost", trace.WithAttributes(attrLossReason.String(string(e.lost))))
		span.SetAttributes(attrLeaseEnd.String("lost"))
		span.SetStatus(codes.Error, "lease lost: "+string(e.lost))
	case e.failed:
		span.SetAttributes(attrLeaseEnd.String("released"), attrErrorType.String("release_failed"))
		span.SetStatus(codes.Error, "release failed; the lock expires after its TTL")
	default:
		span.SetAttributes(attrLeaseEnd.String("released"))
	}
	span.End()
}

func (o *lockObserver) acquired(ctx context.Context, e lock.Event) {
	i := lockoutcome.Of(e.Err)
	o.t.inst.acquire.Record(ctx, e.Duration.Seconds(), o.outSets[i].rec...)
	o.t.inst.wait.Record(ctx, e.Waited.Seconds(), o.outSets[i].rec...)

	end := time.Now()
	_, span := o.t.tracer.Start(ctx, "latchkey.lock", trace.WithTimestamp(end.Add(-e.Duration)), o.outStart[i])
	if !span.IsRecording() {
		return // not sampled: nothing to keep for the lease's end
	}
	span.SetAttributes(attrWaited.Float64(e.Waited.Seconds()), attrAttempts.Int(e.Attempts))
	if kh, ok := o.t.keyHash(e.Key); ok {
		span.SetAttributes(kh)
	}
	if e.Err != nil || e.Lease == nil {
		if i >= 3 { // invalid or a backend's error; not acquiring is an answer
			span.SetStatus(codes.Error, "acquire failed: "+lockoutcome.Names[i])
			span.SetAttributes(attrErrorType.String(lockoutcome.Names[i]))
		}
		span.End(trace.WithTimestamp(end))
		return
	}
	o.t.leaseSet.start(e.Lease, span)
}

// renewError classifies a failed renewal for the error.type attribute,
// without its text (which may name the key).
func renewError(err error) string {
	if errors.Is(err, lock.ErrNotHeld) {
		return "refused"
	}
	return "unconfirmed"
}
