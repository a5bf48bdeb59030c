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
// spliced into them. The name's read-write lock (NewRW) and semaphore
// (NewSemaphores) live beside these keys, "<prefix>{K}:rw:..." and
// "<prefix>{K}:sem...", and every acquisition script checks the other
// modes' keys first: one name is one resource, and an acquisition while
// another mode holds it fails at once with a *lock.ModeError ("K is held as
// a semaphore of 3 permits"), costing the common case one EXISTS.
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
// An uncontended acquire and release pair costs Redis eight commands, those
// the scripts run included:
//
//   - EVALSHA of the acquire script; EXISTS of the name's read-write lock
//     and semaphore keys, which must be absent; SET NX PX of the lock key,
//     which takes the lock with its lease; TIME, and a SET PX GET of the
//     fencing counter that stores the clock and answers the last token
//     (below), which two issues within one microsecond follow with a second
//     SET.
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
// same step, unless the waiters mark is set: six commands and one round
// trip per hand-off, instead of a release and an attempt, eight commands and
// two round trips. The scripts need Redis 6.2 or later (SET ... GET).
//
// # Fencing tokens: the exact guarantee
//
// Every script that issues a token — a lock's acquisition and hand-over, a
// read-write lock's, a semaphore's, and so an election's term — sets
//
//	token = max(last + 1, the server's TIME in microseconds)
//
// and keeps the name's counter for 24 h after the last issue
// (WithTokenRetention).
//
//   - While the counter survives, every token for K is strictly greater than
//     every earlier one, whatever the clock does.
//   - The counter rises by one per issue, far slower than the clock (one
//     Redis cannot sustain an acquisition of one key per microsecond), so a
//     token is at most a few microseconds ahead of the clock of the server
//     that issued it. When the counter is lost (a restart without
//     persistence, eviction, expiry, FLUSHALL) or stale (a failover to a
//     replica that had not received the last acquisitions, while the old
//     master went on serving during a partition), the next token is the
//     new server's clock, above every token issued before, provided that
//     clock is not behind the old master's by more than the time between
//     the old master's last issue and the new server's first. A failover
//     takes seconds (Sentinel's down-after-milliseconds, a Cluster's node
//     timeout), and NTP keeps clocks within milliseconds: the assumption is
//     that the servers' clocks agree within the failover time and are never
//     stepped back by more than it.
//   - Tokens are about microsecond timestamps (about 1.8e15 today): below
//     2^53, exact in Lua's doubles until the year 2255.
//
// What a failover may still cost: two holders for a while. Replication is
// asynchronous, so a replica promoted before it received an acquisition
// does not know the lock is held and grants it again; the old holder keeps
// its lease until its next renewal is refused or unconfirmed. What it can no
// longer cost: a repeated or lower token, so a resource that checks tokens
// (package fence) refuses the old holder's writes once the new holder has
// written. Redis's WAIT (an acquisition returns only once N replicas have
// it) and min-replicas-to-write (a master refuses writes without enough
// replicas in reach) narrow that window but do not close it: a replica
// that acknowledged can still lose the race to be promoted, and Redis
// documents WAIT as not making it strongly consistent. latchkey does not
// send WAIT; set min-replicas-to-write and min-replicas-max-lag on the
// servers to stop an isolated master from granting locks (its acquisitions
// then fail with NOREPLICAS). For one holder even across failovers, use a
// consensus backend (lock/etcdlock, lock/zklock) or lock/redlock.
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
