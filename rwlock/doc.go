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
// waits, before its first attempt and again with each attempt, for at most
// [IntentTTL] past the last one: while that record lives, readers are not
// let in, and those that hold the name drain. A waiting writer that gives up
// (ctx done, wait limit passed) withdraws the record; one that dies stops
// renewing it, and it ends after IntentTTL. A try-once writer
// (WithWait(0)) records nothing.
//
// # Backends
//
// A backend implements [Backend]; [New] builds a [Locker] on it. The
// in-process one is lock/memlock's NewRW; the others live with the lock
// backends of the same server (lock/redislock's NewRW, lock/sqllock's
// NewRW). Package rwlocktest is the conformance suite each passes against
// its real server.
package rwlock
