// Package redlock is a lock.Locker over N independent Redis masters (the
// Redlock algorithm), with fencing tokens that increase across holders,
// renewal by quorum, a lost-lease notice and pub/sub wake-ups.
//
//	l, err := redlock.New([]redlock.Client{rdb1, rdb2, rdb3, rdb4, rdb5})
//	defer l.Close()
//	lease, err := l.Acquire(ctx, "order:42")
//	defer lease.Release(ctx)
//	// write with lease.Token(); stop when <-lease.Done()
//
// On each node the lock is a lock/redislock lock (same keys, fencing counter,
// tokens max(last + 1, the node's clock in microseconds) and release channel,
// run by the same code). This package only adds the quorum and the
// token write-back. Use a prefix of its
// own (WithPrefix) on servers that also serve redislock Lockers.
//
// # Acquire, renew, release
//
// An attempt sends SET NX PX (redislock's acquire script) to every node at
// once, each call bounded by the node timeout (WithNodeTimeout: TTL/10, at
// most 500 ms): a node that has not answered by then counts as failed for
// the round, even when its client ignores context deadlines (go-redis's
// default options do), so one silent node costs the node timeout, not the
// client's read timeout and retries. With a quorum Q (default N/2+1) taken, it chooses the token
// (below) and, only when the nodes' counters do not already fence it, writes
// it back to the nodes taken below it, again at once. The attempt succeeds
// only if the token is fenced and the time since the attempt began is under
// TTL - drift (drift = TTL/100 + 2 ms), which is also the lease's local
// deadline. Otherwise every node that may have been taken is given back
// (compare-and-pexpire to 1 ms, our own lock only) and the attempt fails:
// lock.ErrNotAcquired when others hold the key or votes split, an error
// naming the first failure when more than N-Q nodes failed (so with no
// quorum reachable Acquire fails at once, it never returns a lease). An
// uncontended attempt on N healthy nodes needs no write-back: one round trip,
// as for redsync, and one more to release.
//
// Renewal (every TTL/3, by the lock.Manager) extends the lease on every node
// and succeeds with Q confirmations; all leases due at a tick are renewed in
// one pipeline per node. When more than N-Q nodes say the lock is not ours
// the lease is lost at once; other failures are retried until the local
// deadline, when it is lost too. Release deletes the lock on every node
// (compare-and-delete) and reports lock.ErrNotHeld when more than N-Q nodes
// did not hold it. Renewal does not re-take nodes that lost the lock (a
// restart): the lease lives on while Q nodes still hold it.
//
// Calls of concurrent Acquire and Release calls to one node are coalesced
// into pipelines, one in flight per node at a time (WithSendsInFlight): a
// Redlock lock costs N times the system calls of a one-server lock, and
// fewer, larger pipelines save most of them under load.
//
// # Fencing tokens: the exact guarantee
//
// Each node's token for a key is redislock's: max(its counter + 1, its clock
// in µs), stored back as its counter, in the same script as the SET NX. An
// acquisition that took the set K of nodes (|K| >= Q) chooses as its token T
// the Q-th smallest of the tokens K returned, so that
//
//   - L = {n in K : n's token <= T} has at least Q nodes, and
//   - F = {n in K : n's counter >= T while n still held our lock} has at
//     least N-Q+1 nodes.
//
// The nodes of K that returned T or more are in F already; when there are
// fewer than N-Q+1 of them, T is written back (raise.lua: on a node that
// still holds our lock, raise the counter to at least T) to the nodes of K
// below T, and each one that confirms joins F. The lease is granted only when
// |F| >= N-Q+1. When all N nodes were taken, the N-Q+1 nodes that returned the
// largest tokens are F, and nothing is written back.
//
// Guarantee: a lease's token is strictly greater than the token of every
// lease of the same key granted (Acquire returned) before it, provided (a)
// server clocks run at rates within the drift allowance — the premise of
// Redlock's mutual exclusion too — and (b) no node lost its counter, or one
// that did (restart without persistence, eviction, FLUSHALL) reads on its
// clock, when it issues its next token, more µs than every counter value it
// held before the loss; and (c) nobody deletes lock keys behind the holders'
// back (an operator's DEL is a revocation: it voids mutual exclusion, too).
//
// Proof. Let lease A be granted at time gA and lease B, of the same key, at
// gB > gA. |FA| >= N-Q+1 and |LB| >= Q, so FA and LB share a node n. On n,
// A's lock key existed from A's SET NX until at least the moment n's counter
// was known to be >= TA (the SET NX itself, or raise.lua, which checked the
// key), and B's from B's SET NX; SET NX never succeeds while the key exists,
// so one of the two held n first.
//
//   - Suppose B held n first. B's key on n was set after B's attempt began at
//     sB and lives TTL from then on n's clock, so, by (a), past
//     sB + TTL - drift > gB > gA; A set its key on n before gA, so A's SET NX
//     would have found B's key: impossible.
//   - So A held n first and B's SET NX on n came after A's key was gone, thus
//     after n's counter was >= TA. The counter only grows (max(counter + 1,
//     clock), and raises), so B's token from n is > TA, and, n being in LB,
//     TB >= B's token from n > TA.
//
// If n lost its counter between A's time on it and B's SET NX, B's token from
// n is n's clock in µs, which by (b) exceeds the counter value TA it held. (b)
// holds when the restarted node's clock did not step back and server clocks
// agree within the time the node was down: the write-back may have stored a
// token from another node's clock. Redlock's own advice covers both this and
// mutual exclusion: keep a node restarted without persistence out for at
// least one TTL; and run NTP. With node clocks equal (one machine, as in our
// tests) (b) always holds.
//
// Why this choice of T. Taking the highest token of K and writing nothing
// back does not give the guarantee: a node whose counter runs ahead (a faster
// clock) can issue A's token, and B's quorum may share with A's only a node
// whose counter is behind; TestTokenWriteBack shows it. Taking the highest
// token and writing it back to all of K (the rule before this one) is correct
// but costs a round trip on every acquisition, because tokens come from µs
// clocks and nodes almost never return equal ones. The Q-th smallest is the
// least T with |L| >= Q, which leaves the most nodes of K at or above it:
// N-Q+1 of them when all N nodes were taken, enough for F without a
// write-back (TestTokenWithoutWriteBack); with fewer nodes taken the nodes
// below T are raised (TestTokenPartialWriteBack). A raise that finds our lock
// gone removes its node from K, and if T is then no longer the Q-th smallest
// of K the attempt fails. Tokens of failed attempts may be skipped; tokens
// are µs timestamps, below 2^53.
//
// # Waiting
//
// A waiting Acquire watches the key on every node through redislock's shared
// per-node subscription (one per node and Locker, opened by the first Acquire
// that may wait); the Manager's poll, timed by the holder's remaining lease,
// is the safety net. The waiting Acquire calls of one Locker queue per key,
// longest-waiting first, and only the head attempts: the others are answered
// lock.ErrNotAcquired without a server call. A release by this Locker wakes
// the head once every node has answered the release, so its attempt finds
// every node free; a release seen on any node (another Locker's) is passed on
// to the head too. So one release costs one attempt, and the Locker's own
// waiters never split the nodes' votes between them. Waiters of different
// Lockers are not queued across Lockers: they contend, and a split vote is
// given back and retried after a jittered pause.
//
// # Loss
//
// Lease.Done closes when renewal loses its quorum (more than N-Q nodes say
// the lock is not ours: revoked, expired during a pause, nodes restarted) or
// is not confirmed by a quorum before the local deadline (nodes down or
// partitioned away), which falls before the nodes' expiry by the drift
// allowance.
package redlock
