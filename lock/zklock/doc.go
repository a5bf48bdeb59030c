// Package zklock is a lock.Locker on ZooKeeper, built on the
// ephemeral-sequential recipe that Apache Curator's InterProcessMutex and
// Python kazoo's Lock use, so Go, Java and Python services can share a lock.
//
// # Layout
//
// Lock key k lives at the znode <prefix>/k (WithPrefix, "/latchkey" by
// default; a "/" in k nests it). Each contender creates one
// EPHEMERAL_SEQUENTIAL child of it; the contender with the lowest sequence
// number holds the lock, the others queue in sequence order, and each waiter
// watches only the contender just ahead of it (an exists watch), so a release
// wakes one waiter: no herd. Missing parents are created as container nodes,
// which the server removes once they are empty, so lock paths do not pile up.
// A node's data is the holder label (lock.WithHolder), empty without one;
// Curator stores the client's IP there and kazoo its identifier; neither
// orders the queue by it.
//
// One name is one resource: a lock and a read-write lock (NewRW) of one name
// are one queue, as kazoo's Lock and WriteLock are; a semaphore's permits
// (NewSemaphores) are children of the same node outside the queue, and a
// contender that finds permits beside its node, or a semaphore that finds
// contenders beside its permits, withdraws with a *lock.ModeError.
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
// # Sessions and TTL
//
// A Locker has one ZooKeeper session; every node it creates is ephemeral to
// that session. The server deletes them when the session ends: on Close, or
// when it has heard nothing from the client for the negotiated session
// timeout (the client pings every third of it). So on the server a lock
// lives exactly as long as its holder's session, whatever the TTL.
//
// WithTTL here is only the holder's local deadline: the lock.Manager checks
// the lease every TTL/3 (renewal: the session is connected and our node still
// exists with our czxid) and closes Done with lock.ErrLeaseLost when a check
// says the node is gone, or when none has succeeded for TTL minus a drift
// margin (the session is disconnected, the server is down or paused). For
// that to be safe the local deadline must come before the server can expire
// the session, so Acquire refuses a TTL longer than the session timeout the
// server granted (Locker.SessionTimeout) with an error wrapping
// lock.ErrInvalid.
//
// In an ensemble the server that answers a check (a follower, say) is not
// the one that expires sessions: only the leader does, one session timeout
// after it last heard of the session, and it hears of a session on a
// follower only from the follower's answers to its pings, every half tick.
// A follower cut off from the leader keeps answering for up to syncLimit
// ticks while the leader counts down. So a check does not vouch for the
// lease for TTL from when it was sent, but only up to the session's
// horizon: the last moment the leader is proven to have heard of the
// session, plus the session timeout, less the drift margin. The leader
// heard of it at the handshake (it creates or revalidates the session),
// and of every request sent at least three quarters of a tick before a
// Sync it answered; a heartbeat Syncs every quarter tick, so while the
// leader can be reached the horizon trails the clock by about a tick and a
// half, and from a follower cut off from it, it stops: every lease of the
// session ends before the leader can expire the session and hand the lock
// to someone else. The tick is the servers' tickTime, 2 s unless
// WithTickTime says otherwise (a longer tick than assumed breaks the
// bound; a server never grants a session shorter than two ticks, so the
// Locker assumes at most half the granted timeout). A lease is renewed
// every TTL/3, or more often when its horizon is nearer than that would
// allow. Choose the session timeout (WithSessionTimeout, 30 s by default,
// clamped by the server's min/maxSessionTimeout) at least a tick and a half
// longer than the longest TTL you use; a TTL closer to it is renewed more
// often, and a shorter TTL only makes the holder give up sooner while
// disconnected.
//
// What the TTL does not do: it does not make the server free the lock after
// TTL. A lease with lock.WithFixedTTL ends locally after its TTL, and the
// Manager then deletes the node; if that delete cannot reach the server, the
// node stays until the session ends or the reconnect sweep deletes it. A
// holder frozen longer than the session timeout (GC pause, SIGSTOP) loses its
// node on the server before it can notice; it learns of the loss when it runs
// again (its local deadline has passed), which is the window fencing tokens
// exist for (CURATOR-206/-604: Curator's holder is not told at all).
//
// A node deleted behind the holder's back (an operator, zkCli delete) or an
// expired session is found by the next check, within TTL/3. go-zookeeper
// starts a new session after an expiry; nodes of the old one are gone, and
// the Locker's later Acquires use the new session.
//
// # Release
//
// Release deletes our own node, with a version check, by its full path
// (GUID and sequence number), which no other contender can have: a late or
// retried Release never deletes the next holder's node, and reports
// lock.ErrNotHeld when the node was already gone. A try-once Acquire
// (lock.WithWait(0)) that does not get the lock deletes its node at once, as
// does a waiting Acquire that gives up.
//
// # Contexts
//
// go-zookeeper v1.0.4 takes no contexts: a call waits for its answer or the
// loss of the connection. Every call here returns when its ctx is done and
// leaves the request to finish in the background; calls made while the
// session is not connected fail at once with a transient error.
package zklock
