// Package elect is leader election with fencing terms, on any latchkey lock
// backend: one instance of a service does the job (the outbox relay, the
// scheduler, the reconciliation run) and knows the moment it must stop.
//
// An [Election] is a name on a [lock.Locker]. [Election.Campaign] blocks
// until the caller leads, ctx is done or a wait limit passes, and returns a
// [Term]: a lease on the name whose holder label is the leader's value (who
// it is: host, address). The term carries a fencing token, strictly greater
// than every earlier term's for the name, to pass to whatever the leader
// writes to; [Term.Done] closes the moment the leader can no longer be sure
// it leads (resigned, expired, renewal refused or unconfirmed), exactly as a
// [lock.Lease]'s does, and [Term.Err] says which. A leader that was paused
// or cut off and wakes up after a new leader was elected learns it at once
// from Done, and the resource it writes to refuses its stale token (see
// package fence).
//
// [Term.Proclaim] changes the value without giving up leadership;
// [Term.Resign] ends the term and hands it to the next candidate at once,
// without waiting for a TTL. Anyone, campaigning or not, can ask who leads
// ([Election.Leader]) and follow the changes ([Election.Observe]): a
// channel that delivers the current leader first and every change after,
// from the backend's watch where it has one (etcd and ZooKeeper watches,
// the in-memory backend) and otherwise by reading the lock at most
// WithPollInterval apart, woken early by the backend's release hints (Redis
// pub/sub, PostgreSQL LISTEN/NOTIFY). [Election.Run] runs a function only
// while leader, with a context cancelled when the term ends, and campaigns
// again afterwards if asked ([Again]), with backoff: the LeaderSelector
// loop.
//
// Candidates queue in arrival order where the backend queues (etcd,
// ZooKeeper); elsewhere a resign wakes the waiting candidates of each
// process and only the longest of each tries, so there is no herd.
//
// On etcd the keys are those of etcd's concurrency.Election (and
// concurrency.Mutex): <prefix><name>/<lease ID in hex>, the lowest create
// revision leads and the key's value is the leader's value, so `etcdctl
// elect NAME PROPOSAL`, `etcdctl elect -l NAME` and etcd's Go Election share
// an election with latchkey, both ways. On ZooKeeper the nodes are those of
// Curator's LeaderSelector (lock/zklock's default node names) or of kazoo's
// Election (zklock.KazooNames), the candidate's value as node data.
package elect
