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
// # Loss
//
// Lease.Done closes when renewal loses its quorum (more than N-Q nodes say
// the lock is not ours: revoked, expired during a pause, nodes restarted) or
// is not confirmed by a quorum before the local deadline (nodes down or
// partitioned away), which falls before the nodes' expiry by the drift
// allowance.
//
// # Internals
//
// How Acquire, renewal and release use the nodes, the proof of the fencing
// guarantee above and why the Q-th smallest token is chosen, and how waiting
// works are described in docs/redlock-internals.md.
package redlock
