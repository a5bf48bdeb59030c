// Package semaphore is latchkey's counting semaphore: N permits per name,
// shared by every process that uses the name, each permit a lease with the
// lock contract (package lock).
//
// A permit is renewed in the background while held, unless taken with
// [lock.WithFixedTTL]; its Done channel closes the moment its holder can no
// longer be sure it holds it; it is released once; and it expires when its
// holder dies, so a crashed holder never keeps a permit for longer than the
// TTL. Acquire waits with the options of a lock ([lock.WithWait],
// [lock.WithTTL], [lock.WithHolder]).
//
// Typical uses: at most 4 concurrent calls to a rate-limited payment provider
// across all instances, at most 2 heavy report jobs at once:
//
//	sem, err := client.Semaphore("payment-provider", 4)
//	...
//	permit, err := sem.Acquire(ctx, lock.WithTTL(10*time.Second))
//	if err != nil {
//		return err
//	}
//	defer permit.Release(ctx)
//
// # The permit count
//
// Every party passes the same N for a name. The backend stores the N of the
// first holder while anyone holds a permit; an Acquire with another N fails
// with an error wrapping [ErrMismatch] (and takes nothing) rather than
// merging two views of the limit. Once every permit is released or expired
// the name may be used with another N.
//
// # Fencing tokens with N > 1
//
// Each acquisition gets a fencing token strictly greater than every token
// issued before for the name, by any party, for any number of permits. With
// N = 1 it fences exactly as a lock's token does: a resource that accepts a
// write only with a token at least the highest it has seen refuses a holder
// whose permit was lost (paused past its TTL, partitioned), as soon as a
// later holder has written.
//
// With N > 1 several holders are valid at once, so that same rule on one
// shared resource refuses every holder but the newest, valid or not: it
// protects "the newest holder wins" resources and no more. The token does
// not tell a lost permit from a live older one. What it does protect for
// N > 1: a resource each holder writes alone (a per-permit slot, file or
// row, written with the token of the permit that claimed it), whose stale
// writer is refused once the slot has a newer writer; and a check, at the
// resource or by the holder, that the token is among the live ones
// ([Client.Inspect]). A semaphore bounds concurrency (load on a provider);
// it never makes N writers of one value safe.
//
// # Waiting and fairness
//
// The Acquire calls of one [Client] that wait for a name are served in
// arrival order; when one takes a permit the next attempts at once, so
// several free permits are filled in order without waiting for a release.
// Across Clients (processes) the order is what the backend gives, as for
// locks: on ZooKeeper and etcd waiters queue on the server, on Redis and SQL
// each Client's longest waiter races for a freed permit. Waiters are woken by
// the backend's release hint, never by a herd of all waiters.
//
// # Backends
//
// A backend implements [Backend], whose calls receive the acquisition as a
// [Request]: the name, the permit count and how many permits it takes.
// TryAcquire takes that many permits or fails with lock.ErrNotAcquired,
// telling when the earliest holder's lease ends. The optional capabilities
// ([ReleaseWatcher], [ServerQueue], [BatchRenewer], [PipelinedReleaser],
// [Bounded]; [Inspector], [Lister] and [Breaker] for operators) are found by
// type assertion. [New] puts the backend under a lock.Manager, which brings
// renewal (in batches where the backend can), loss detection, waiting and
// release hints, so a permit is a [lock.Lease] wrapped in a [Permit].
// lock/memlock, lock/redislock, lock/sqllock (PostgreSQL, SQLite, MySQL),
// lock/etcdlock and lock/zklock (in kazoo's layout) provide Clients, and
// lock/lockurl opens them from a URL; package semaphore/semaphoretest is the
// conformance suite each passes against its real server.
package semaphore
