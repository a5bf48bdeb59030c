package latchkeyotel

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey-go/latchkey/idem"
	"github.com/latchkey-go/latchkey/idem/idemhttp"
)

// outcomeSets caches the metric attributes of each outcome of one handler.
type outcomeSets[O comparable] struct {
	base []attribute.KeyValue
	key  attribute.Key
	m    map[O]attrs // read only after construction
}

func newOutcomeSets[O interface {
	comparable
	String() string
}](base []attribute.KeyValue, key attribute.Key, known []O) outcomeSets[O] {
	s := outcomeSets[O]{base: base, key: key, m: make(map[O]attrs, len(known))}
	for _, o := range known {
		s.m[o] = s.make(o.String())
	}
	return s
}

func (s outcomeSets[O]) make(out string) attrs {
	kv := append(append([]attribute.KeyValue(nil), s.base...), s.key.String(out))
	return newAttrs(attribute.NewSet(kv...))
}

func (s outcomeSets[O]) get(o O, name func() string) attrs {
	if m, ok := s.m[o]; ok {
		return m
	}
	return s.make(name())
}

// DoObserver returns the idem.Observer of the idem.Do calls of one
// operation, named name (a fixed name such as "charge"). Each call is a span
// latchkey.idem.do, a child of the call's context's span, with its outcome;
// a replay's span says how long the replay took.
func (t *Telemetry) DoObserver(name string) idem.Observer {
	base := []attribute.KeyValue{attrHandler.String(name)}
	sets := newOutcomeSets(base, attrIdemOut, doOutcomes[:])
	return func(ctx context.Context, e idem.Event) {
		opt := sets.get(e.Outcome, e.Outcome.String)
		t.inst.idemN.Add(ctx, 1, opt.add...)
		t.inst.idemD.Record(ctx, e.Duration.Seconds(), opt.rec...)
		end := time.Now()
		_, span := t.tracer.Start(ctx, "latchkey.idem.do", trace.WithTimestamp(end.Add(-e.Duration)),
			trace.WithAttributes(attrHandler.String(name), attrIdemOut.String(e.Outcome.String())))
		if e.Outcome == idem.OutcomeStoreError {
			span.SetStatus(codes.Error, "idempotency store failed")
			span.SetAttributes(attrErrorType.String("store_error"))
		}
		span.End(trace.WithTimestamp(end))
	}
}

var doOutcomes = [...]idem.Outcome{
	idem.OutcomeExecuted, idem.OutcomeReleased, idem.OutcomeKept, idem.OutcomeReplayed,
	idem.OutcomeConflict, idem.OutcomeMismatch, idem.OutcomeInvalid, idem.OutcomeStoreError,
	idem.OutcomeCanceled,
}

// HTTPObserver returns the idemhttp.Observer of one middleware, named
// handler (a fixed name such as "pay", never a path with ids in it). The
// middleware is part of the request, so its outcome goes on the request's
// own span (otelhttp's server span, say): the attributes
// latchkey.idem.handler, latchkey.idem.outcome and latchkey.idem.duration,
// an event latchkey.idem.replayed for a replay (with the replayed status
// and the record's age) and latchkey.idem.refused for a 409 or 422, and
// status Error for a store failure. A request with no recording span gets a
// span latchkey.idem.request of its own, with the same attributes and
// events, so the outcome is traced either way; the trace of a refused or
// replayed retry says so where one looks first.
func (t *Telemetry) HTTPObserver(handler string) idemhttp.Observer {
	base := []attribute.KeyValue{attrHandler.String(handler)}
	sets := newOutcomeSets(base, attrIdemOut, httpOutcomes[:])
	return func(r *http.Request, e idemhttp.Event) {
		ctx := r.Context()
		opt := sets.get(e.Outcome, e.Outcome.String)
		t.inst.idemN.Add(ctx, 1, opt.add...)
		t.inst.idemD.Record(ctx, e.Duration.Seconds(), opt.rec...)
		span := trace.SpanFromContext(ctx)
		own := !span.IsRecording()
		end := time.Now()
		if own {
			_, span = t.tracer.Start(ctx, "latchkey.idem.request", trace.WithTimestamp(end.Add(-e.Duration)))
		}
		span.SetAttributes(attrHandler.String(handler), attrIdemOut.String(e.Outcome.String()),
			attrReplayWait.Float64(e.Duration.Seconds()))
		switch e.Outcome {
		case idemhttp.OutcomeReplayed:
			span.AddEvent("latchkey.idem.replayed", trace.WithAttributes(
				attrIdemStatus.Int(e.Status), attrReplayAge.Float64(e.Age.Seconds())))
		case idemhttp.OutcomeConflict, idemhttp.OutcomeMismatch:
			span.AddEvent("latchkey.idem.refused", trace.WithAttributes(attrIdemOut.String(e.Outcome.String())))
		}
		if e.Err != nil {
			span.SetStatus(codes.Error, "idempotency store failed")
			span.SetAttributes(attrErrorType.String("store_error"))
		}
		if own {
			if e.Status != 0 {
				span.SetAttributes(attrIdemStatus.Int(e.Status))
			}
			span.End(trace.WithTimestamp(end))
		}
	}
}

var httpOutcomes = [...]idemhttp.Outcome{
	idemhttp.OutcomeExecuted, idemhttp.OutcomeReleased, idemhttp.OutcomeReplayed,
	idemhttp.OutcomeConflict, idemhttp.OutcomeMismatch, idemhttp.OutcomeBadKey,
	idemhttp.OutcomeBadBody, idemhttp.OutcomeStoreError, idemhttp.OutcomeUnkeyed,
	idemhttp.OutcomeCanceled,
}
