// Package dedup makes each message of an at-least-once broker take effect
// once: a redelivered or republished copy is recognised by its message id and
// not processed again, and a copy whose first processing failed or crashed is
// processed, never lost.
//
// The cycle, per message id, the same for every [Store]:
//
//  1. Claim the id atomically with a processing TTL ([Store.Claim]). Only the
//     claimer runs the handler, under a context that ends at the TTL.
//  2. On success mark the id done for a retention window ([Store.Done]);
//     copies arriving within it are duplicates and are acknowledged without
//     running the handler.
//  3. On a handler error release the claim ([Store.Release]) so the
//     redelivery is processed. If the consumer crashes, the claim expires at
//     the TTL and the redelivery is processed then.
//  4. A copy arriving while the first is still processing is neither
//     acknowledged nor processed: it gets an [*InProgressError] (with the
//     time left on the claim), so that its adapter negatively acknowledges it
//     with that delay or leaves it for redelivery.
//
// The naive recipe, SET consumed:<id> NX before the handler, loses the message
// when the handler fails after the SET; marking the id only after the handler
// succeeded processes it twice when two copies race. The claim with a TTL is
// what closes both holes.
//
// [Deduper.Wrap] is the cycle as middleware around any broker's handler,
// func(ctx, Message) error in and out; [ShouldAck] tells an adapter what to
// do with the error it returns.
//
// Stores: dedup/redisstore (Redis or Redis Cluster; one round trip per message,
// one per batch of ids), and any idem.Store through [FromIdem] (idem's
// memstore, redisstore, sqlstore and layered keep the same claim state
// machine). The sqlinbox package is the transactional inbox: the id is
// inserted in the same database transaction as the business write, so the
// effect and the dedup record commit or roll back together and no TTL is
// needed. Every exact Store passes the deduptest conformance suite.
//
// The bloomfilter package is approximate: a Bloom filter on plain Redis
// bitmaps that remembers a processed id in about 11 bits instead of a
// record. Alone (bloomfilter.Lossy) it acknowledges a genuinely new message
// without processing it at up to the filter's false-positive rate, so it is
// for flows that may lose messages, never for money; its gain is memory. In
// front of an exact store (bloomfilter.Prefilter) it loses nothing, since
// the exact store decides every claim, but it saves no round trip either:
// a new id must still be claimed there. The Prefilter passes deduptest.
//
// An operator looks up a message id's mark and forgets it, so the next
// copy is processed, through [Inspector]: dedup/redisstore, sqlinbox and FromIdem
// over any idem store implement it; a Bloom filter answers "maybe seen" or
// "not seen" and cannot forget ([ErrCannotForget]).
//
// Retention is a window, not forever: a copy arriving after it is processed
// again. Choose it longer than the broker's longest redelivery or replay
// delay.
package dedup
