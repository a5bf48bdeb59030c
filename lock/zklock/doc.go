// Package zklock is a lock.Locker on ZooKeeper, built on the
// ephemeral-sequential recipe that Apache Curator's InterProcessMutex and
// Python kazoo's Lock use, so Go, Java and Python services can share a lock.
//
// # Node names and other clients
//
// ZooKeeper appends a 10-digit sequence number, taken from one counter per
// parent, to every child it creates there; all contenders under one parent
// are therefore ordered by that suffix whatever the rest of their names. We
// sort by it and recognise as contenders the children whose names end in
// "lock-" + 10 digits (Curator: _c_<uuid>-lock-<seq>) or in "__lock__" or
// "__rlock__" + 10 digits (kazoo's Lock and ReadLock: <uuid hex>__lock__<seq>);
// other children are ignored. Our own nodes are named as Curator names
// them (CuratorNames, the default) or as kazoo does (KazooNames): the two
// cannot be served by one name, because Curator sorts by what follows the
// last "lock-" of every child and kazoo ignores children without
// "__lock__". Use KazooNames on paths shared with kazoo and the default with
// Curator; Curator and kazoo themselves cannot share a path. Curator is the
// default because the JVM services are the peers we most often share with.
//
// The GUID in the name makes the create protected, as in Curator's
// protected mode: when the answer to a create is lost with the connection,
// the children are searched for our GUID; a node we could not find or delete
// is remembered and deleted after the next reconnect (see Sessions). A
// create is not abandoned when the caller's context ends: its answer is
// waited for (up to 5 s) and the node it made deleted, since a lookup sent
// beside a create still in flight could miss the node it makes.
//
// # Elections
//
// An election of package elect on a zklock Locker is a lock whose node data
// is the leader's value. With the default CuratorNames its nodes are those
// of Curator's LeaderSelector, which is built on InterProcessMutex and stores
// the candidate's id as node data: latchkey and LeaderSelector candidates
// share one election path, and each sees the other's leader
// (LeaderSelector.getLeader, getParticipants). With KazooNames they are those
// of kazoo's Election, which is kazoo's Lock with the candidate's identifier
// as data (Election.contenders). Curator's LeaderLatch is not served: its
// nodes are named "-latch-", and Curator's LeaderSelector is the recipe that,
// like Election.Run, runs a function while leader. Proclaim sets our node's
// data (version-checked); observers watch the lock's children and the
// leader's data.
//
// # Fencing
//
// Lease.Token is the lock node's czxid, the zxid of the transaction that
// created it. Zxids are ensemble-wide, strictly increasing, never reused and
// kept across restarts (a new leader epoch only raises the high 32 bits). A
// holder's node had the lowest sequence number while it held, so every later
// holder's node was created after it and has a higher czxid: tokens increase
// across holders, across server restarts, and across the removal and
// re-creation of the lock's parent (which restarts sequence numbers but not
// zxids).
//
// # Internals
//
// The node layout, how sessions bound a holder's certainty, what a release
// does and how contexts are honoured are described in docs/zklock-internals.md.
package zklock
