package redislock

import (
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/elect"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
)

// A primitive takes and releases one hold of key on c and returns its token.
type primitive struct {
	name string
	take func(t *testing.T, c Client, key string) uint64
}

// primitives are every Redis-backed way to hold a name, each issuing tokens.
var primitives = []primitive{
	{"lock", func(t *testing.T, c Client, key string) uint64 {
		l := newLocker(t, c)
		lease, err := l.Acquire(ctxT(t), key, lock.WithTTL(faultTTL), lock.WithWait(0))
		if err != nil {
			t.Fatalf("lock Acquire: %v", err)
		}
		defer lease.Release(ctxT(t))
		return lease.Token()
	}},
	{"lock hand-over", func(t *testing.T, c Client, key string) uint64 {
		// A release with a waiter of its own Locker behind it takes the lock
		// for that waiter in the release script: a second way to issue.
		l := newLocker(t, c)
		first, err := l.Acquire(ctxT(t), key, lock.WithTTL(faultTTL), lock.WithWait(0))
		if err != nil {
			t.Fatalf("lock Acquire: %v", err)
		}
		var (
			wg     sync.WaitGroup
			second *lock.Lease
			werr   error
		)
		wg.Go(func() {
			second, werr = l.Acquire(ctxT(t), key, lock.WithTTL(faultTTL), lock.WithWait(10*time.Second))
		})
		for l.Waiting(key) == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := first.Release(ctxT(t)); err != nil {
			t.Fatalf("Release: %v", err)
		}
		wg.Wait()
		if werr != nil {
			t.Fatalf("waiter's Acquire: %v", werr)
		}
		defer second.Release(ctxT(t))
		return second.Token()
	}},
	{"read-write writer", func(t *testing.T, c Client, key string) uint64 { return takeRW(t, c, key, false) }},
	{"read-write reader", func(t *testing.T, c Client, key string) uint64 { return takeRW(t, c, key, true) }},
	{"semaphore", func(t *testing.T, c Client, key string) uint64 {
		sc, err := NewSemaphores(c)
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		s, err := sc.Semaphore(key, 3)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Acquire(ctxT(t), lock.WithTTL(faultTTL), lock.WithWait(0))
		if err != nil {
			t.Fatalf("semaphore Acquire: %v", err)
		}
		defer p.Release(ctxT(t))
		return p.Token()
	}},
	{"election", func(t *testing.T, c Client, key string) uint64 {
		e, err := elect.New(newLocker(t, c), key, elect.WithTTL(faultTTL))
		if err != nil {
			t.Fatal(err)
		}
		term, err := e.Campaign(ctxT(t), "host-a", elect.WithWait(0))
		if err != nil {
			t.Fatalf("Campaign: %v", err)
		}
		defer term.Resign(ctxT(t))
		return term.Token()
	}},
}

// takeRW takes and releases key's read-write lock on c, shared or not, and
// returns the token.
func takeRW(t *testing.T, c Client, key string, shared bool) uint64 {
	l, err := NewRW(c)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	take := l.Lock
	if shared {
		take = l.RLock
	}
	lease, err := take(ctxT(t), key, lock.WithTTL(faultTTL), lock.WithWait(0))
	if err != nil {
		t.Fatalf("read-write lock (shared %v): %v", shared, err)
	}
	defer lease.Release(ctxT(t))
	return lease.Token()
}

// waitReplicated blocks until master's writes so far reached one replica.
func waitReplicated(t *testing.T, master *redis.Client) {
	t.Helper()
	n, err := master.Wait(ctxT(t), 1, 5*time.Second).Result()
	if err != nil || n < 1 {
		t.Fatalf("WAIT 1: %d replicas, %v", n, err)
	}
}

// TestFailoverToStaleReplicaIssuesHigherTokens: a replica is promoted
// (REPLICAOF NO ONE, as Sentinel promotes one during a partition) while the
// old master still serves and issues one more token that never reaches the
// replica. The promoted replica's next token must still be above it: fence
// accepts a token equal to the highest it has seen, so a repeated token lets
// the stale holder's write land after the new holder's.
func TestFailoverToStaleReplicaIssuesHigherTokens(t *testing.T) {
	for _, p := range primitives {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			master := testsvc.StartRedis(t)
			replica := testsvc.StartRedis(t, "--replicaof", "127.0.0.1", strings.Split(master.Addr(), ":")[1])
			mc, rc := newClient(t, master.Addr()), newClient(t, replica.Addr())
			waitLinkUp(t, rc)
			key := "failover:" + p.name

			before := p.take(t, mc, key)
			waitReplicated(t, mc)
			if err := rc.Do(ctxT(t), "REPLICAOF", "NO", "ONE").Err(); err != nil {
				t.Fatalf("promote: %v", err)
			}
			unreplicated := p.take(t, mc, key) // the old master still serves
			after := p.take(t, rc, key)
			t.Logf("tokens: %d replicated, %d on the old master only, %d on the promoted replica", before, unreplicated, after)
			if unreplicated <= before {
				t.Fatalf("old master's tokens did not rise: %d after %d", unreplicated, before)
			}
			if after <= unreplicated {
				t.Fatalf("promoted replica issued %d, not above the old master's unreplicated %d", after, unreplicated)
			}
		})
	}
}

// waitLinkUp waits until the replica behind rc has synchronised.
func waitLinkUp(t *testing.T, rc *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := rc.Info(ctxT(t), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never synchronised: %v\n%s", err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterTakeoverAfterUnreplicatedTokenIssuesHigherTokens: on a Redis
// Cluster, a key's master issues tokens its replica never receives and dies;
// the replica takes over (CLUSTER FAILOVER TAKEOVER, as an operator forces a
// failover without the master's agreement). Every token issued on the cluster
// afterwards must be above the ones that died with the master.
func TestClusterTakeoverAfterUnreplicatedTokenIssuesHigherTokens(t *testing.T) {
	nodes := startCluster(t)
	cc := newClusterClient(t, nodes)
	master, names := namesOnOneMaster(t, cc, nodes)
	mc := newClient(t, master.Addr())
	bus := strconv.Itoa(testsvc.FreePort(t))
	replica := testsvc.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--cluster-port", bus)
	rc := newClient(t, replica.Addr())
	host, port, _ := strings.Cut(replica.Addr(), ":")
	if err := mc.Do(ctxT(t), "CLUSTER", "MEET", host, port, bus).Err(); err != nil {
		t.Fatalf("CLUSTER MEET: %v", err)
	}
	id := nodeID(t, mc)
	waitFor(t, "the new node to learn the master", func() bool {
		return rc.Do(ctxT(t), "CLUSTER", "REPLICATE", id).Err() == nil
	})
	waitLinkUp(t, rc)

	before := make([]uint64, len(primitives))
	for i, p := range primitives {
		before[i] = p.take(t, cc, names[i])
	}
	waitReplicated(t, mc)

	// The replica stops reading and the master drops it: what the master
	// writes from now on reaches no replica, and dies with the master.
	if err := replica.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := mc.ClientKillByFilter(ctxT(t), "TYPE", "replica").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE replica: %v", err)
	}
	lost := make([]uint64, len(primitives))
	for i, p := range primitives {
		lost[i] = p.take(t, mc, names[i])
	}
	if err := master.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := replica.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(ctxT(t), "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER TAKEOVER: %v", err)
	}
	waitFor(t, "the replica to take over", func() bool {
		info, err := rc.Info(ctxT(t), "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	})

	var alive []*testsvc.RedisServer
	for _, n := range nodes {
		if n != master {
			alive = append(alive, n)
		}
	}
	after := newClusterClient(t, append(alive, replica))
	for i, p := range primitives {
		var got uint64
		waitFor(t, "the cluster to route "+p.name+" to the new master", func() bool {
			return after.Ping(ctxT(t)).Err() == nil && after.Set(ctxT(t), "probe:{"+names[i]+"}", 1, time.Second).Err() == nil
		})
		got = p.take(t, after, names[i])
		t.Logf("%s: %d replicated, %d lost with the master, %d after the takeover", p.name, before[i], lost[i], got)
		if lost[i] <= before[i] {
			t.Errorf("%s: the old master's tokens did not rise: %d after %d", p.name, lost[i], before[i])
		}
		if got <= lost[i] {
			t.Errorf("%s: %d issued after the takeover, not above %d, which the dead master issued", p.name, got, lost[i])
		}
	}
}

// namesOnOneMaster returns one master of the cluster and, for each
// primitive, a name whose keys live on that master.
func namesOnOneMaster(t *testing.T, cc *redis.ClusterClient, nodes []*testsvc.RedisServer) (*testsvc.RedisServer, []string) {
	t.Helper()
	slots, err := cc.ClusterSlots(ctxT(t)).Result() //nolint:staticcheck // CLUSTER SLOTS gives the ranges as numbers; the tests' Redis 7 still answers it
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	owner := func(slot int64) string {
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
	var master *testsvc.RedisServer
	var names []string
	for i := 0; len(names) < len(primitives); i++ {
		name := "takeover:" + strconv.Itoa(i)
		slot, err := cc.ClusterKeySlot(ctxT(t), name).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		addr := owner(slot)
		if master == nil {
			for _, n := range nodes {
				if n.Addr() == addr {
					master = n
				}
			}
		}
		if master != nil && addr == master.Addr() {
			names = append(names, name)
		}
	}
	return master, names
}

// nodeID returns the cluster node id of the server c talks to.
func nodeID(t *testing.T, c *redis.Client) string {
	t.Helper()
	id, err := c.Do(ctxT(t), "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("CLUSTER MYID: %v", err)
	}
	return id
}

// waitFor polls cond every 50 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
