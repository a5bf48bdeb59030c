package latchkeyotel

import (
	"context"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/fence"
	"github.com/latchkey-go/latchkey/state"
)

// FenceObserver returns the fence.Observer that counts refused fenced
// writes and adds an event latchkey.fence.refused (guard, op) to the
// refused caller's span. ObserveRefusals installs it; use it directly to
// join it with another observer.
func (t *Telemetry) FenceObserver() fence.Observer {
	return func(ctx context.Context, r fence.Refusal) {
		attrs := trace.WithAttributes(attrFenceGuard.String(r.Guard), attrFenceOp.String(r.Op))
		t.inst.fence.Add(ctx, 1, metric.WithAttributes(attrFenceGuard.String(r.Guard), attrFenceOp.String(r.Op)))
		trace.SpanFromContext(ctx).AddEvent("latchkey.fence.refused", attrs)
	}
}

// StateObserver returns the state.Observer that counts transitions and
// updates not applied, and adds an event latchkey.state.refused (table,
// reason, target state) to the caller's span. ObserveRefusals installs it.
func (t *Telemetry) StateObserver() state.Observer {
	return func(ctx context.Context, r state.Refusal) {
		t.inst.state.Add(ctx, 1, metric.WithAttributes(attrStateTable.String(r.Table), attrStateReason.String(r.Reason)))
		trace.SpanFromContext(ctx).AddEvent("latchkey.state.refused", trace.WithAttributes(
			attrStateTable.String(r.Table), attrStateReason.String(r.Reason), attrStateTo.String(r.To)))
	}
}

// ObserveRefusals makes FenceObserver and StateObserver the process's
// fence and state observers (fence.SetObserver, state.SetObserver),
// replacing any set before.
func (t *Telemetry) ObserveRefusals() {
	fence.SetObserver(t.FenceObserver())
	state.SetObserver(t.StateObserver())
}
