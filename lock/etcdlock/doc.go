// Package etcdlock is a lock.Locker on etcd (API v3), built on the key layout
// of etcd's own concurrency.Mutex and `etcdctl lock`, so Go services using
// this package, the Mutex, and shell scripts using etcdctl exclude each other
// on the same name.
//
// # Layout
//
// Each contender for lock name k writes one key, <prefix>k/<lease ID in hex>,
// attached to an etcd lease of its own (WithPrefix; "" by default, which is
// what the Mutex and etcdctl use). The key with the lowest create revision
// under <prefix>k/ holds the lock; the others wait in create-revision order.
// Names are data, but a "/" in a name nests it: keys of "a/b" sit under "a/",
// so a lock on "a/b" also blocks "a" (the Mutex behaves the same). The key's
// value is the holder label (lock.WithHolder), empty without one, as the
// Mutex and etcdctl leave theirs.
//
// One name is one resource: the transaction that queues a contender also
// counts the keys of the name's read-write lock (NewRW, <prefix>k/read/ and
// <prefix>k/write/) and semaphore (NewSemaphores, under
// DefaultSemaphorePrefix), and each of those counts the others', so a lock,
// a read-write lock and a semaphore of one name exclude each other: an
// acquisition that finds another mode's key withdraws its own and fails
// with a *lock.ModeError.
//
// # Elections
//
// etcd's concurrency.Election uses this layout too (its proposal is the
// key's value), so an election of package elect on an etcdlock Locker is
// shared, both ways, with etcd's Go Election, `etcdctl elect NAME PROPOSAL`
// and `etcdctl elect -l NAME`. Proclaim is Election.Proclaim's transaction
// (a put on the key's own lease if its create revision is still ours), and
// observers watch the name's keys.
//
// # Fencing
//
// Lease.Token is the holder key's create revision. etcd's revision counter is
// cluster-wide, never reused, and kept in the data directory, so a later
// holder's key always has a higher create revision than an earlier holder's,
// across restarts too. While a key holds, every other key under the name was
// created after it, so the order of holders is the order of their tokens.
//
// # Leases and renewal
//
// Each key has an etcd lease of its own: one lease carries at most one key at
// a time. The lease is granted with the lock's TTL rounded up to whole
// seconds (the server may grant more: its minimum is 1.5 election timeouts,
// 2 s by default) and renewed by the lock.Manager's watchdog every TTL/3 with
// one keep-alive request and, in parallel, a read that the key still has our
// create revision.
//
// Keep-alives go over a few long-lived LeaseKeepAlive streams per Locker
// (four, opened when first needed), not a new stream per request as
// clientv3's KeepAliveOnce does: opening a stream costs more than the
// request. The streams carry only the keep-alives the Locker asks for; nothing
// is renewed in the background. A stream answers in the order it was asked,
// so each answer goes to the oldest unanswered request on its stream (its
// lease ID checked); a caller that gives up leaves its request queued, its
// answer discarded. When a stream breaks, its unanswered requests fail: the
// server may or may not have renewed those leases, and the Locker counts them
// as not renewed and sends the keep-alive again on a new stream. A stream
// whose oldest request is unanswered for 2 s when its caller gives up is
// abandoned too. With a Client that has no ActiveConnection (not a
// *clientv3.Client and not embedding one), and after Locker.Close, each
// keep-alive is a KeepAliveOnce of the Client.
//
// A released lock's lease is not revoked: its key is gone, and the Locker
// keeps the empty lease for its next lock with the same whole-second TTL
// (one per concurrent holder, up to 256 per TTL), so a lock/unlock pair costs
// two raft writes (the put and the delete), as for the Mutex with its session
// lease, instead of four (grant and revoke too). A lease is reused only when
// its key's delete was confirmed; after any other outcome it is revoked. Locker.Close revokes the kept
// leases; without it they expire on the server after their TTL, holding
// nothing.
//
// A reused lease may have less than the lock's TTL left. The Locker knows a
// time until which each lease lives on the server: the send time of its last
// confirmed grant or keep-alive plus the TTL granted (the server counts from
// the later arrival). When that is not past the new lock's TTL counted from
// the attempt's start (with the Manager's clock-rate allowance applied to
// both), a keep-alive, which the leader answers without a raft write, is
// sent in parallel with the attempt's transaction, and the lock is held only
// if it confirmed a TTL of at least the lock's. The Manager counts the local
// deadline from the attempt's start, before both requests were sent; the
// server counts the lease from the keep-alive's arrival, after that, and never
// grants less than asked: the server's expiry still comes after the holder's
// Done, as with a fresh grant. If the lease has expired meanwhile (the
// keep-alive or the put finds it gone, and its key went with it), the attempt
// is made again once on a new grant.
//
// A renewed lock (not lock.WithFixedTTL) skips that keep-alive when the lease
// was confirmed at most a third of the TTL ago: the Locker is a
// lock.PartialAcquirer, and reports the lock certain only until the lease's
// known expiry (less the allowance). The Manager then gives the lease up at
// that point unless its renewal, due when two thirds of the TTL are left as
// for every renewed lease, confirms it first. A held lease is in that state
// just before each of its renewals; reusing a lease in it saves a round trip
// per lock at the cost of one background renewal per lease every third of a
// TTL, as holding costs anyway.
//
// We chose per-key leases over etcd's Session (one lease per client, kept
// alive in the background) because:
//
//   - the holder's loss is decided in one place, the Manager, which counts its
//     local deadline from before each confirmed renewal, while the server
//     counts the lease from when the keep-alive arrives: the server's expiry
//     can only come after the holder's Done. A background keep-alive loop
//     would keep keys alive on the server that the holder has already given
//     up (WithFixedTTL, a holder that gave up after a failed renewal).
//   - locks have their own TTLs; one shared lease cannot express 300 ms for
//     one lock and 30 s for another.
//   - two Acquire calls in one process on one name need two keys; a shared
//     lease would give both the same key (<name>/<lease>), which the Mutex
//     treats as already held: reentrancy, which latchkey refuses.
//   - a lease lost or revoked takes only its own lock with it.
//
// A key deleted behind the holder's back (an operator, `etcdctl del`) is found
// by the next renewal, which closes Done with lock.ErrLeaseLost (etcd #6127
// and #10811: the Mutex's holder is never told). So is a lease the server
// expired, and a keep-alive that is not confirmed before the local deadline
// (the server paused or unreachable).
//
// # Release
//
// Release deletes the key and reports lock.ErrNotHeld when it was already
// gone (its lease is then revoked, not kept). The key's name ends in the
// holder's lease ID, which no other client writes under, and a Locker gives a
// kept lease to its next lock only after the delete is confirmed, never after
// one failed. So a late or retried delete cannot meet the next holder's key
// (etcd #22082: with the Mutex a retried Unlock deletes the next holder's key,
// which has the same name when the Session is reused), and no compare is
// needed: a plain delete costs the server less than a transaction.
//
// # Waiting
//
// A waiting Acquire keeps its key in the queue (its lease kept alive by the
// backend while it waits) and watches only the key just ahead of it: each
// release wakes one waiter, no herd. A woken waiter whose key is queued
// checks its place with a read of the queue's head (no raft write), its
// lease's keep-alive in parallel, as above. The watch starts at the current revision
// and is followed by a read of the predecessor, instead of the Mutex's watch
// from the revision of an earlier read: etcd serves watchers that start in the
// past from a loop that runs every 100 ms, which is the Mutex's contended
// hand-off floor. Here the hand-off takes a few milliseconds on loopback. A
// try-once Acquire (lock.WithWait(0)) that does not get the lock withdraws its
// key at once, as does a waiting Acquire that gives up.
package etcdlock
