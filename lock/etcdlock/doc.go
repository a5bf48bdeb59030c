// Package etcdlock is a lock.Locker on etcd (API v3), built on the key layout
// of etcd's own concurrency.Mutex and `etcdctl lock`, so Go services using
// this package, the Mutex, and shell scripts using etcdctl exclude each other
// on the same name.
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
// # Internals
//
// The key layout, how leases are granted and renewed, what a release does
// and how waiting works are described in docs/etcdlock-internals.md.
package etcdlock
