// Package redisconsumer consumes a Redis Streams consumer group through a
// deduplicating handler (go-redis v9), so each message takes effect once
// although the group delivers it at least once.
//
// A [Consumer] reads new entries with XREADGROUP (blocking, a bounded batch at
// a time), runs each through its handler, normally [dedup.Deduper.Wrap], and
// acknowledges with XACK what [dedup.ShouldAck] says is settled: processed
// messages and duplicates. Entries whose handler failed, or whose id another
// consumer is processing, are not acknowledged; they stay in the group's
// pending entries list. Every reclaim interval the consumer takes over, with
// XAUTOCLAIM, pending entries idle for longer than the min-idle time (its own
// failures, and the entries of consumers that died) and runs them again.
//
// The dedup id is a field of the entry (default "id"): the producer's message
// id or business key, never the stream entry id, which a republished copy
// does not share. [Publish] writes entries in that shape.
//
// What is left pending is retried forever: there is no dead-letter stream and
// no delivery limit. An entry without a valid id field stays pending too, and
// is reported to the error handler at each attempt.
package redisconsumer
