// Package latchkeyotel turns latchkey's observer hooks into OpenTelemetry
// spans and metrics. It is the only package of the module that imports
// OpenTelemetry, and it uses the API only: the program chooses and sets up
// the SDK and its exporters (or none, and every call is a no-op).
//
// One [Telemetry] serves a whole program. Plug its observers in where the
// hooks are:
//
//	tel, _ := latchkeyotel.New()                                  // global providers
//	locker.SetObserver(tel.LockObserver("redis", latchkeyotel.Server("redis", "10.0.0.5:6379")...))
//	idemhttp.Middleware(store, idemhttp.WithObserver(tel.HTTPObserver("pay")))
//	idem.Do(ctx, store, key, fn, idem.WithObserver(tel.DoObserver("charge")))
//	dedup.New(store, dedup.WithObserver(tel.DedupObserver("orders")))
//	tel.ObserveRefusals()                                         // fence and state, process-wide
//
// Spans are children of the span in the caller's context:
//
//	latchkey.lock          one Acquire call, and the lease it won until it ended: backend,
//	                       outcome, wait and hold durations, attempts; a lost lease has
//	                       an event latchkey.lock.lease_lost with its reason (status Error)
//	latchkey.idem.do       one idem.Do call: outcome
//	latchkey.dedup.process one delivery: outcome
//
// A request through the idempotency middleware annotates the request's own
// span (otelhttp's server span): its outcome as attributes, a replay as an
// event latchkey.idem.replayed, a 409 or 422 as latchkey.idem.refused; a
// request with no span gets a latchkey.idem.request span of its own. A
// refused fenced write or state transition is an event
// (latchkey.fence.refused, latchkey.state.refused) on the caller's span.
//
// Keys, fencing tokens, principals, message ids and bodies are never
// attributes: they are the caller's data, and each would be a series of its
// own. [WithHashedKeys] adds a keyed hash of a lock's key
// (latchkey.lock.key_hash), enough to tell whether two spans are about one
// key and not enough to recover it.
//
// The metrics, in seconds where they are durations:
//
//	latchkey.lock.acquire.duration  histogram {latchkey.lock.backend, latchkey.lock.outcome}
//	latchkey.lock.wait.duration     histogram {latchkey.lock.backend, latchkey.lock.outcome}
//	latchkey.lock.hold.duration     histogram {latchkey.lock.backend, latchkey.lock.end}: released or lost
//	latchkey.lock.leases_lost       counter   {latchkey.lock.backend, latchkey.lock.loss_reason}
//	latchkey.idem.requests          counter   {latchkey.idem.handler, latchkey.idem.outcome}
//	latchkey.idem.duration          histogram {latchkey.idem.handler, latchkey.idem.outcome}
//	latchkey.dedup.messages         counter   {latchkey.dedup.consumer, latchkey.dedup.outcome}
//	latchkey.dedup.duration         histogram {latchkey.dedup.consumer, latchkey.dedup.outcome}
//	latchkey.fence.refused          counter   {latchkey.fence.guard, latchkey.fence.op}
//	latchkey.state.refused          counter   {latchkey.state.table, latchkey.state.reason}
//
// plus the attributes given to LockObserver (db.system.name, server.address)
// on the lock metrics and spans.
package latchkeyotel
