// Package redislock is a lock.Locker on one Redis server or a Redis Cluster:
// SET NX PX with a fencing token, automatic renewal, a lost-lease notice, and
// waiting woken by pub/sub.
//
//	l, err := redislock.New(rdb) // *redis.Client, *redis.ClusterClient, UniversalClient
//	defer l.Close()
//	lease, err := l.Acquire(ctx, "order:42")
//	defer lease.Release(ctx)
//	// write with lease.Token(); stop when <-lease.Done()
//
// # Keys
//
// A lock on key K lives in three Redis keys sharing one hash tag, so every
// script runs on Redis Cluster: "<prefix>{K}" holds the owner (a random
// 128-bit id, whose first 64 bits are the same for every lease of one
// Locker) with the lease as its expiry, "<prefix>{K}:fence" the last
// fencing token, and "<prefix>{K}:waiters" marks, for 10 s after a failed
// attempt or until the next release, that a waiter of another Locker than
// the holder's waits for K. (A key starting with '}' or '\' gets a
// '\' in front inside the braces.) Keys are passed to scripts as data, never
// spliced into them.
//
// # Round trips and commands
//
// Acquire is one script call: SET NX PX and, on success, the next token; on
// failure it returns the holder's remaining lease, which times the next
// attempt. Release is one compare-and-delete script, Renew one
// compare-and-pexpire script. All run with EVALSHA, falling back to EVAL.
// Concurrent calls of one Locker are coalesced into pipelines (see
// WithBatching), and all leases due for renewal at once are renewed in one
// pipeline.
//
// An uncontended acquire and release pair costs Redis six commands, those
// the scripts run included:
//
//   - EVALSHA of the acquire script; SET NX PX of the lock key, which takes
//     the lock with its lease; INCR of the fencing counter, which issues the
//     token (TIME and a SET more when the counter is missing, see below).
//   - EVALSHA of the release script; GET of the lock key, which checks that
//     the lease is still the releaser's; DEL of the lock key and the waiters
//     mark together, whose count tells whether anyone waited (then, and
//     only then, a PUBLISH wakes them).
//
// A failed attempt costs SET NX PX, a GET of the holder (to tell whether it
// is the waiter's own Locker's), a SET of the waiters mark when it is not,
// and a PTTL for the holder's remaining lease; a renewal costs GET and
// PEXPIRE. A release with a waiter of its own Locker behind it runs another
// script, which takes the lock for that waiter with the next token in the
// same step, unless the waiters mark is set: five commands (EVALSHA, GET,
// EXISTS of the mark, SET PX, INCR) and one round trip per hand-off,
// instead of a release and an attempt, six commands and two round trips.
//
// # Fencing tokens: the exact guarantee
//
// The acquire script sets token = INCR of the counter. When the counter is
// missing (INCR answers 1) it restarts from now, the server's TIME in
// microseconds since the Unix epoch, and is kept for 24 h from then
// (WithTokenRetention); it is not extended by later acquisitions, so a busy
// key's counter restarts from the clock once a retention.
//
//   - While the counter survives, every token for K is strictly greater than
//     every earlier one, whatever the clock does.
//   - When the counter is lost — Redis restarted without persistence, the key
//     evicted or expired, FLUSHALL, a failover to a replica that had not yet
//     received the last increments — the next token is the server's clock in
//     microseconds. The counter rose by one per acquisition since it last
//     started from the clock, far slower than the clock (one Redis cannot
//     sustain an acquisition of one key per microsecond for long), so every
//     earlier token is below the clock's reading then, provided the clock
//     of the server issuing it has not been stepped backwards across the
//     loss.
//   - Tokens are therefore about microsecond timestamps (about 1.7e15
//     today): below 2^53, exact in Lua's doubles until the year 2255.
//
// Pass the token to the resource you write to (see the fence package): a lock
// can always be lost without its holder noticing in time, and only the
// resource can refuse the late write.
//
// # Waiting
//
// Each Locker has one pub/sub subscription, to the channel "<prefix>released",
// opened by the first Acquire that may wait (before its first attempt) and
// shared by all its waiters; Close ends it. A release publishes only when the
// waiters mark is set, and deletes it: uncontended locks, and locks only one
// Locker's goroutines wait for, publish nothing. A waiter that fails again
// after the wake-up against another Locker's holder sets the mark anew. A
// release message wakes the Locker's waiters of its key, and the
// lock.Manager lets only the longest of them attempt: within a Locker,
// waiters are served in arrival order (see lock.Manager). A release that
// publishes nothing wakes the releasing Locker's waiters itself, or takes
// the lock for the longest of them in its own script (above). While a
// waiter of another Locker has marked the key, every release publishes and
// takes the lock for nobody, so the longest waiter of each Locker attempts
// after the message and a random delay under a millisecond, with even odds:
// no Locker's waiter starves behind another Locker's busy goroutines.
// Missed messages (a reconnecting subscription) cost only latency: the
// Manager polls as a safety net, and a resubscription wakes every waiter.
//
// Plain PUBLISH is used, not sharded SPUBLISH: on Redis Cluster a PUBLISH
// reaches subscribers on every node, so one subscription to one channel serves
// all keys, whatever their slot, and needs no round trip per wait. SPUBLISH
// would confine the message to the key's shard but need a subscription per
// shard and a SSUBSCRIBE (one round trip) per waited key; since releases
// publish only while someone waits, the cluster-wide broadcast stays cheap.
//
// # Loss
//
// Lease.Done closes when renewal is refused (the key is gone or another owner
// holds it: FLUSHALL, a restart, a revocation, expiry during a pause) or is not
// confirmed before the local deadline, which falls before the server's expiry
// (the holder starts its clock before sending, the server after receiving). So
// after a partition, a slow link or a stopped process, the holder learns of the
// loss before anyone else can take the lock, as far as clock rates agree within
// the drift margin.
package redislock
