// Package rwlock is a read-write lock with leases: any number of readers
// hold a name together, a writer holds it alone, and a writer that waits
// keeps new readers out, so a stream of readers cannot starve it. Both modes
// hand out a [lock.Lease] from lock's Manager: renewed while held, Done the
// moment it may be lost, released once, expired after its TTL when its
// holder dies.
//
// # Tokens
//
// One fencing counter per name is raised by every acquisition, shared or
// exclusive. So a writer's token is greater than every token issued before
// it for the name (it fences as a lock's does), and a reader's token is
// greater than the token of every writer that held the name before it: a
// resource that records the token of its last write can tell from a read's
// token which writes the read saw (those with lower tokens) and which it
// cannot have seen (those with higher ones).
//
// # Writer preference
//
// A writer that waits (any WithWait but 0) records on the server that it
// waits, with its first failed attempt and again with each later one, for
// at most [IntentTTL] past the last: while that record lives, readers are
// not let in, and those that hold the name drain. A waiting writer that
// gives up (ctx done, wait limit passed) withdraws the record; one that dies
// stops renewing it, and it ends after IntentTTL. On etcd and ZooKeeper the
// record is the writer's queued key or node, as in their recipes, and ends
// with its lease or session instead. A try-once writer (WithWait(0))
// records nothing.
//
// # Waiting
//
// Waiting readers are all woken by a release and may all get in together;
// none waits behind another reader. A waiting Acquire watches the backend
// (a [ReleaseWatcher]) from its first failed attempt on; without one it
// polls every few milliseconds.
//
// # Backends
//
// A backend implements [Backend]; [New] builds a [Locker] on it. The
// in-process one is lock/memlock's NewRW; the others live with the lock
// backends of the same server (lock/redislock's NewRW, lock/sqllock's
// NewRW). Package rwlocktest is the conformance suite each passes against
// its real server.
package rwlock
