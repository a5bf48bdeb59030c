// Package fence is the resource's side of a distributed lock: it accepts a
// write only when the write's fencing token is at least the highest token the
// resource has already applied, and it lets a holder claim the resource with
// its token before it reads.
//
// A holder that reads, computes and writes back claims first, then reads:
//
//	claim: raise the resource's token to mine, refused if it has a higher one
//	read:  after the claim (in SQL, in the same transaction)
//	write: with the same token
//
// [github.com/latchkey-go/latchkey/fence/sqlfence]'s Guard.Read and
// [github.com/latchkey-go/latchkey/fence/redisfence]'s Guard.Read claim and
// read in one statement or script.
//
// # Why fencing the write is not enough
//
// A lock lease can be lost without its holder noticing in time: a GC pause, a
// SIGSTOP, a clock jump, a network partition. No lock can prevent the paused
// holder's late write on its own, because the holder cannot check and write
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
// That refuses a stale write only after a newer token has reached the
// resource. A read-modify-write loses an update without a claim:
//
//	fresh holder (token 2) reads 1000
//	stale holder (token 1) wakes, writes 900: applied, the row still has token 0
//	fresh holder writes 700 from its read: applied
//	balance 700, not 600: the stale holder's acknowledged debit is gone
//
// With a claim, token 2 is on the row before the fresh holder reads, the
// stale write is refused, and the balance shows exactly the debits that were
// acknowledged. A relative update ("balance = balance - 100", sqlfence.Add)
// needs no read at all.
//
// The comparison and the write are one atomic step in the resource: one
// conditional UPDATE in SQL, one script in Redis. Never read the token,
// compare in the client and then write: a second writer can slip in between.
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
// When the condition fails, report [ErrStale] and change nothing. A claim is
// the same conditional write setting only the token; where the store can, it
// returns the data in the same step (UPDATE ... RETURNING, a script). In-process
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
