// Package fence is the resource's side of a distributed lock: it accepts a
// write only when the write's fencing token is at least the highest token the
// resource has already applied.
//
// A lock lease can be lost without its holder noticing in time: a GC pause, a
// SIGSTOP, a clock jump, a network partition. The paused holder wakes up and
// writes, after its lock has passed to someone else who has written too. No
// lock can prevent that on its own, because the holder cannot check and write
// in one atomic step. The resource can: every lock in latchkey hands out
// fencing tokens ([github.com/latchkey-go/latchkey/lock.Lease.Token]) that
// grow with each acquisition of a key, and the resource keeps, next to the
// data it protects, the highest token it has applied. A write with token t
//
//   - is applied, and raises the stored token to t, when t >= the stored token
//     (the same holder may write many times with its token);
//   - changes nothing and reports [ErrStale] when t < the stored token: a
//     later holder has written, so this writer's lease is over.
//
// The comparison and the write are one atomic step in the resource: one
// conditional UPDATE in SQL ([github.com/latchkey-go/latchkey/fence/sqlfence]),
// one script in Redis ([github.com/latchkey-go/latchkey/fence/redisfence]).
// Never read the token, compare in the client and then write: a second writer
// can slip in between.
//
// # Any store with compare-and-set
//
// The pattern needs only an atomic conditional write. Keep the token with the
// data (a column, a field, a version-stamped document, a companion key in the
// same shard) and make the write conditional on it:
//
//	UPDATE t SET data = :data, fence_token = :t WHERE id = :id AND fence_token <= :t
//	DynamoDB: ConditionExpression "attribute_not_exists(fence_token) OR fence_token <= :t"
//	etcd:     Txn(If(Value(tokenKey) <= t)).Then(Put(key, data), Put(tokenKey, t))
//	MongoDB:  updateOne({_id: id, fence_token: {$lte: t}}, {$set: {data, fence_token: t}})
//
// When the condition fails, report [ErrStale] and change nothing. In-process
// resources can use [Check] under their own mutex.
//
// # Which token guards what
//
// Tokens are ordered only within one lock key: guard a resource with the
// tokens of one lock key, always the same one. A [Holder] is anything carrying
// a token; *lock.Lease is one, so a holder passes its lease and never copies
// the token by hand. Combine with [github.com/latchkey-go/latchkey/lock.Do],
// whose context is cancelled when the lease is lost, so a writer that notices
// the loss in time stops before the resource has to refuse it.
//
// This package imports only the standard library.
package fence
