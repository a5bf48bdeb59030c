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
// # Loss
//
// Lease.Done closes when renewal is refused (the key is gone or another owner
// holds it: FLUSHALL, a restart, a revocation, expiry during a pause) or is not
// confirmed before the local deadline, which falls before the server's expiry
// (the holder starts its clock before sending, the server after receiving). So
// after a partition, a slow link or a stopped process, the holder learns of the
// loss before anyone else can take the lock, as far as clock rates agree within
// the drift margin.
//
// # Internals
//
// The keys a lock lives in, the Redis commands each call costs and how
// waiting works are described in docs/redislock-internals.md.
package redislock
