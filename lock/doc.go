// Package lock is latchkey's distributed-lock contract and the machinery every
// backend shares.
//
// A [Locker] hands out a [Lease] for a key. While a lease is held it is renewed in
// the background (the watchdog) every TTL/3, unless it was taken with
// [WithFixedTTL]. The holder learns the moment it can no longer be sure it holds
// the lock: [Lease.Done] closes and [Lease.Err] says why. [Lease.Token] is a
// fencing token, strictly greater than every token issued before it for that key,
// for the resource to check with the [github.com/latchkey-go/latchkey/fence]
// pattern: a lock can always be lost without its holder noticing in time (GC
// pause, SIGSTOP, partition), so the resource must have the last word.
//
// Backends (lock/sqllock, lock/memlock, and the Redis, etcd and ZooKeeper
// packages) implement the small Backend interface of package
// [github.com/latchkey-go/latchkey/lock/driver], the backend authors'
// contract with its optional capabilities; a [Manager] turns a Backend
// into a Locker, so renewal, waiting, loss detection and release behave the same
// everywhere. A Manager keeps one timer while it holds leases, not one per
// lease, which runs a goroutine only when a renewal or a deadline is due,
// and none when it holds nothing.
//
// Waiting is the same everywhere: the Acquire calls of one Manager (one
// backend's Locker) that wait for a key are served in arrival order, and
// only the longest waiter attempts. A release through the Manager wakes it
// at once; releases elsewhere reach it through the backend's release hint
// (pub/sub, NOTIFY, watch) or, without one, its poll. Across Managers the
// order is what the backend gives: etcd and ZooKeeper queue waiters on the
// server, so every Manager's waiters are served in arrival order; on Redis,
// Redlock, SQL and memory the Managers' longest waiters race for each
// release, and a Manager hands a key straight to its own next waiter at
// most every other release, so no Manager's waiters starve another's. On
// a single Redis server a release takes the key for its Manager's next
// waiter in the release script itself (driver.HandoverReleaser), but only
// while no waiter of another Manager has marked the key; once one has,
// every release leaves the key free for all the Managers' waiters.
//
// A holder can change its label while it holds ([Lease.SetHolder], on
// backends that are a driver.Relabeler), and anyone can follow a lock's holder
// without taking it ([Manager.WatchHolder]): package elect builds leader
// election on both.
//
// [Manager.SetObserver], promoted to every backend's Locker, reports each
// acquisition, renewal, loss and release to an [Observer]: the metrics package
// turns them into Prometheus metrics and [LogObserver] into log/slog records.
// Unobserved Managers do no work for it.
//
// Locks are not reentrant: Go has no goroutine identity, and sync.Mutex is not
// reentrant either. Pass the Lease instead.
package lock
