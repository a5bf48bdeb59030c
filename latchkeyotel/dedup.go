package latchkeyotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/dedup"
)

// DedupObserver returns the dedup.Observer of one consumer, named consumer
// (a fixed name such as "orders"). Each delivery is a span
// latchkey.dedup.process, a child of the context given to Process, with its
// outcome: processed, duplicate, busy, failed or rejected.
func (t *Telemetry) DedupObserver(consumer string) dedup.Observer {
	base := []attribute.KeyValue{attrConsumer.String(consumer)}
	sets := newOutcomeSets(base, attrDedupOut, dedupOutcomes[:])
	return func(ctx context.Context, e dedup.Event) {
		opt := sets.get(e.Outcome, e.Outcome.String)
		t.inst.dedupN.Add(ctx, 1, opt.add...)
		t.inst.dedupD.Record(ctx, e.Duration.Seconds(), opt.rec...)
		end := time.Now()
		_, span := t.tracer.Start(ctx, "latchkey.dedup.process", trace.WithTimestamp(end.Add(-e.Duration)),
			trace.WithAttributes(attrConsumer.String(consumer), attrDedupOut.String(e.Outcome.String())))
		switch {
		case e.Outcome == dedup.OutcomeRejected && e.Err != nil:
			span.SetStatus(codes.Error, "delivery rejected")
			span.SetAttributes(attrErrorType.String("rejected"))
		case e.StoreErr != nil:
			span.SetStatus(codes.Error, "dedup store failed after the handler")
			span.SetAttributes(attrErrorType.String("store_error"))
		}
		span.End(trace.WithTimestamp(end))
	}
}

var dedupOutcomes = [...]dedup.Outcome{
	dedup.OutcomeProcessed, dedup.OutcomeDuplicate, dedup.OutcomeBusy, dedup.OutcomeFailed, dedup.OutcomeRejected,
}
