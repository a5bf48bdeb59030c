package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/latchkey-go/latchkey/internal/redisnode"
	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/locktest"
)

// cluster is five private redis-servers and an admin client for each.
type cluster struct {
	srv   []*testsvc.RedisServer
	admin []*redis.Client
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	c := &cluster{}
	for range 5 {
		s := testsvc.StartRedis(t)
		c.srv = append(c.srv, s)
		c.admin = append(c.admin, newClient(t, s.Addr()))
	}
	return c
}

func newClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// locker returns a Locker on all five nodes, with its own clients, closed by
// t's cleanup.
func (c *cluster) locker(t testing.TB, opts ...Option) *Locker {
	t.Helper()
	l, _ := c.lockerAndClients(t, opts...)
	return l
}

// lockerAndClients is locker, also returning the Locker's clients.
func (c *cluster) lockerAndClients(t testing.TB, opts ...Option) (*Locker, []*redis.Client) {
	t.Helper()
	var clients []Client
	var own []*redis.Client
	for _, s := range c.srv {
		rc := newClient(t, s.Addr())
		clients, own = append(clients, rc), append(own, rc)
	}
	l, err := New(clients, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, own
}

// del deletes key's lock on the given nodes.
func (c *cluster) del(t testing.TB, key string, nodes ...int) {
	t.Helper()
	lk, _ := keys(key)
	for _, i := range nodes {
		if err := c.admin[i].Del(context.Background(), lk).Err(); err != nil {
			t.Errorf("DEL on node %d: %v", i, err)
		}
	}
}

// keys returns the Redis keys of key's lock and fencing counter under the
// default prefix.
func keys(key string) (lockKey, fenceKey string) {
	n, err := redisnode.New(redis.NewClient(&redis.Options{}))
	if err != nil {
		panic(err)
	}
	return n.Keys(key)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConformance runs locktest on five private servers. Revoke deletes the
// lock on three of them, just enough to break the holder's quorum; Restart
// restarts all five, which come back empty.
func TestConformance(t *testing.T) {
	c := startCluster(t)
	var cuts locktest.Cuts
	locktest.Run(t, locktest.Harness{
		// Each node has a tenth of the TTL to answer: 200 ms here, since
		// under load all five missed 100 ms (a 1 s TTL's) at once.
		TTL: 2 * time.Second,
		New: func(t *testing.T) lock.Locker {
			l, clients := c.lockerAndClients(t)
			return cuts.Add(l, func() {
				for _, rc := range clients {
					_ = rc.Close()
				}
			})
		},
		Cut: cuts.Cut,
		Holder: func(t *testing.T, key string) string {
			lk, _ := keys(key)
			owner, err := c.admin[0].Get(ctxT(t), lk).Result()
			if err != nil {
				t.Fatalf("GET the lock: %v", err)
			}
			_, label, ok := lock.ParseOwner(owner)
			if !ok {
				t.Fatalf("the lock's value %q is not an owner", owner)
			}
			return label
		},
		Revoke: func(t *testing.T, key string) { c.del(t, key, 0, 2, 4) },
		Restart: func(t *testing.T) {
			for _, s := range c.srv {
				s.Restart()
			}
		},
	})
}

func TestNewInvalid(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	three := []Client{c, c, c}
	var nilClient *redis.Client
	for name, f := range map[string]func() (*Locker, error){
		"no clients":   func() (*Locker, error) { return New(nil) },
		"nil client":   func() (*Locker, error) { return New([]Client{c, nilClient, c}) },
		"minority":     func() (*Locker, error) { return New(three, WithQuorum(1)) },
		"quorum > N":   func() (*Locker, error) { return New(three, WithQuorum(4)) },
		"even split":   func() (*Locker, error) { return New([]Client{c, c, c, c}, WithQuorum(2)) },
		"node timeout": func() (*Locker, error) { return New(three, WithNodeTimeout(0)) },
		"retention":    func() (*Locker, error) { return New(three, WithTokenRetention(time.Millisecond)) },
		"prefix":       func() (*Locker, error) { return New(three, WithPrefix("a{b}")) },
		"no sends":     func() (*Locker, error) { return New(three, WithSendsInFlight(0)) },
	} {
		if l, err := f(); !errors.Is(err, lock.ErrInvalid) || l != nil {
			t.Errorf("%s: New = (%v, %v), want ErrInvalid", name, l, err)
		}
	}
}

// TestNodeLoss stops one, two and three of five nodes. With a quorum left
// locks work as before; without one Acquire fails and a held lease is lost.
func TestNodeLoss(t *testing.T) {
	t.Parallel()
	for _, stopped := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("stopped=%d", stopped), func(t *testing.T) {
			t.Parallel()
			c := startCluster(t)
			a, b := c.locker(t), c.locker(t)
			const ttl = 600 * time.Millisecond
			held := mustAcquire(t, a, "k", lock.WithTTL(ttl))
			for i := range stopped {
				c.srv[i].Stop()
			}
			if stopped >= 3 {
				quorumLost(t, held, b)
				return
			}
			time.Sleep(2 * ttl) // several renewals with nodes down
			quorumKept(t, held, b, stopped)
		})
	}
}

// quorumLost checks, once a quorum of nodes has stopped, that held is lost
// and that b can take no lock, trying once or waiting.
func quorumLost(t *testing.T, held *lock.Lease, b *Locker) {
	t.Helper()
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease kept after its quorum was lost")
	}
	if !errors.Is(held.Err(), lock.ErrLeaseLost) {
		t.Fatalf("Err = %v, want ErrLeaseLost", held.Err())
	}
	for _, opts := range [][]lock.Option{{lock.WithWait(0)}, {lock.WithWait(300 * time.Millisecond)}} {
		lease, err := b.Acquire(ctxT(t), "other", opts...)
		if err == nil || lease != nil {
			t.Fatalf("Acquire without a quorum = (%v, %v), want an error", lease, err)
		}
		t.Logf("Acquire without a quorum: %v", err)
	}
}

// quorumKept checks, with stopped nodes down but a quorum left, that held
// ("k") is kept, that b cannot take it meanwhile, and that a waiter of b
// gets it with a higher token once it is released.
func quorumKept(t *testing.T, held *lock.Lease, b *Locker, stopped int) {
	t.Helper()
	if _, err := b.Acquire(ctxT(t), "k", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-once on a held key = %v, want ErrNotAcquired", err)
	}
	select {
	case <-held.Done():
		t.Fatalf("lease lost with %d of 5 nodes down: %v", stopped, held.Err())
	default:
	}
	waiter := wait(t, b, "k", 5*time.Second)
	time.Sleep(50 * time.Millisecond)
	next := releaseToWaiter(t, held, waiter)
	if next == nil {
		return
	}
	if err := next.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// wait has l wait for key, up to within, in the background; the channel
// delivers the lease, or nil after failing t.
func wait(t *testing.T, l *Locker, key string, within time.Duration) <-chan *lock.Lease {
	got := make(chan *lock.Lease, 1)
	go func() {
		lease, err := l.Acquire(ctxT(t), key, lock.WithWait(within))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- lease
	}()
	return got
}

// releaseToWaiter releases held and returns the lease waiter then gets,
// checking that its token is higher; nil if the waiter failed.
func releaseToWaiter(t *testing.T, held *lock.Lease, waiter <-chan *lock.Lease) *lock.Lease {
	t.Helper()
	if err := held.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next := <-waiter
	if next != nil && next.Token() <= held.Token() {
		t.Fatalf("token %d after %d", next.Token(), held.Token())
	}
	return next
}

// TestNodeRestartMidLease restarts one node, empty, while a lease is held:
// the other four keep it, nobody else gets it, and tokens keep rising. The
// lease is 2 s: under load, with a 600 ms lease, the try-once after the
// restart got the lock.
func TestNodeRestartMidLease(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	a, b := c.locker(t), c.locker(t)
	const ttl = 2 * time.Second
	held := mustAcquire(t, a, "k", lock.WithTTL(ttl))
	c.srv[2].Restart()
	// The restarted node is free; one node is no quorum.
	if _, err := b.Acquire(ctxT(t), "k", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("try-once after a node restart = %v, want ErrNotAcquired", err)
	}
	got := wait(t, b, "k", 10*time.Second)
	time.Sleep(2 * ttl) // six renewals: four of five nodes confirm them
	select {
	case <-held.Done():
		t.Fatalf("lease lost after one node restarted: %v", held.Err())
	case lease := <-got:
		t.Fatalf("second holder (token %v) while the first holds the lock", lease)
	default:
	}
	if next := releaseToWaiter(t, held, got); next != nil {
		_ = next.Release(ctxT(t))
	}
}

// TestTokenWriteBack shows why the highest token is written back: a node
// whose counter runs ahead (a clock ahead of the others, say) issues the
// first holder's token, and the next holder's quorum does not include it.
func TestTokenWriteBack(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	l := c.locker(t)
	_, fk := keys("k")
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	if err := c.admin[0].Set(ctxT(t), fk, strconv.FormatUint(ahead, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.srv[3].Stop()
	c.srv[4].Stop()
	first := mustAcquire(t, l, "k") // on nodes 0, 1, 2
	if first.Token() <= ahead {
		t.Fatalf("token %d not above node 0's counter %d", first.Token(), ahead)
	}
	if err := first.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	c.srv[3].Start()
	c.srv[4].Start()
	c.srv[0].Stop()
	c.srv[1].Stop()
	second := mustAcquire(t, c.locker(t), "k") // on nodes 2, 3, 4
	if second.Token() <= first.Token() {
		t.Fatalf("token %d after %d: the quorums share node 2, whose counter was not raised", second.Token(), first.Token())
	}
	_ = second.Release(ctxT(t))
}

func mustAcquire(t *testing.T, l lock.Locker, key string, opts ...lock.Option) *lock.Lease {
	t.Helper()
	lease, err := l.Acquire(ctxT(t), key, append([]lock.Option{lock.WithWait(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = lease.Release(context.Background()) })
	return lease
}

// setCounters sets key's fencing counter on each node i in offsets to the
// server clock plus offsets[i], as a node whose clock runs that far ahead
// would have left it.
func (c *cluster) setCounters(t *testing.T, key string, offsets map[int]time.Duration) {
	t.Helper()
	_, fk := keys(key)
	for i, d := range offsets {
		v := uint64(time.Now().Add(d).UnixMicro())
		if err := c.admin[i].Set(ctxT(t), fk, strconv.FormatUint(v, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// counter returns key's fencing counter on node i.
func (c *cluster) counter(t *testing.T, key string, i int) uint64 {
	t.Helper()
	_, fk := keys(key)
	v, err := c.admin[i].Get(ctxT(t), fk).Uint64()
	if err != nil {
		t.Fatalf("counter on node %d: %v", i, err)
	}
	return v
}

// TestTokenWithoutWriteBack takes all five nodes, three of whose counters run
// ahead by 1, 2 and 3 hours. The token is the third smallest of the five (the
// node 1 h ahead's), three nodes' counters are already at or above it, so
// nothing is written back: the two nodes on the clock keep counters below
// the token. The next holder, on those two and the node 1 h ahead (the 2 h
// and 3 h nodes stopped), still gets a higher token. Choosing the highest
// token (3 h ahead) without writing it back would fail here.
func TestTokenWithoutWriteBack(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.setCounters(t, "k", map[int]time.Duration{0: 3 * time.Hour, 1: 2 * time.Hour, 2: time.Hour})
	first := mustAcquire(t, c.locker(t), "k")
	if got := c.counter(t, "k", 2); first.Token() != got {
		t.Fatalf("token %d, want node 2's (the third smallest) %d", first.Token(), got)
	}
	for _, i := range []int{3, 4} {
		if got := c.counter(t, "k", i); got >= first.Token() {
			t.Fatalf("node %d's counter %d >= token %d: written back although three nodes fenced it", i, got, first.Token())
		}
	}
	if err := first.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	c.srv[0].Stop()
	c.srv[1].Stop()
	second := mustAcquire(t, c.locker(t), "k") // on nodes 2, 3, 4
	if second.Token() <= first.Token() {
		t.Fatalf("token %d after %d", second.Token(), first.Token())
	}
}

// TestTokenPartialWriteBack takes four of five nodes, two of whose counters
// run ahead by 1 and 2 hours. The token is the third smallest (the node 1 h
// ahead's); only two nodes fence it, so it is written back to the two nodes
// below it. The next holder, on those two and the fifth node, gets a higher
// token; without the write-back its token would come from the clock, hours
// below.
func TestTokenPartialWriteBack(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.setCounters(t, "k", map[int]time.Duration{0: 2 * time.Hour, 1: time.Hour})
	c.srv[4].Stop()
	first := mustAcquire(t, c.locker(t), "k") // on nodes 0 to 3
	if got := c.counter(t, "k", 1); first.Token() != got {
		t.Fatalf("token %d, want node 1's (the third smallest) %d", first.Token(), got)
	}
	for _, i := range []int{2, 3} {
		if got := c.counter(t, "k", i); got != first.Token() {
			t.Fatalf("node %d's counter %d, want the written-back token %d", i, got, first.Token())
		}
	}
	if err := first.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	c.srv[4].Start()
	c.srv[0].Stop()
	c.srv[1].Stop()
	second := mustAcquire(t, c.locker(t), "k") // on nodes 2, 3, 4
	if second.Token() <= first.Token() {
		t.Fatalf("token %d after %d: the quorums share nodes 2 and 3, whose counters were not raised", second.Token(), first.Token())
	}
}

// TestChoose checks the token choice on its own: the quorum-th smallest of
// the tokens of the nodes taken, and how many of them are at or above it.
func TestChoose(t *testing.T) {
	t.Parallel()
	held := fmt.Errorf("held: %w", lock.ErrNotAcquired)
	for _, c := range []struct {
		tokens      []uint64
		set         []error
		token       uint64
		fenced      int
		noWriteBack bool // fenced >= N-Q+1: no write-back
	}{
		{[]uint64{50, 10, 40, 20, 30}, make([]error, 5), 30, 3, true},
		{[]uint64{50, 10, 40, 20, 0}, []error{nil, nil, nil, nil, held}, 40, 2, false},
		{[]uint64{50, 10, 40, 0, 0}, []error{nil, nil, nil, held, held}, 50, 1, false},
		{[]uint64{7, 7, 7, 7, 7}, make([]error, 5), 7, 5, true},
		{[]uint64{1, 9, 9, 0, 2}, []error{nil, nil, nil, held, nil}, 9, 2, false},
	} {
		a := attempt{quorum: 3, tokens: c.tokens, set: c.set}
		token, ok := a.choose()
		fenced := a.fenced(token)
		if !ok || token != c.token || fenced != c.fenced {
			t.Errorf("choose(%v, %v) = %d, %v, fenced %d; want %d, true, fenced %d", c.tokens, c.set, token, ok, fenced, c.token, c.fenced)
		}
		if got := a.enough(fenced); got != c.noWriteBack {
			t.Errorf("choose(%v): write-back skipped = %v, want %v", c.tokens, got, c.noWriteBack)
		}
	}
}

// TestChooseAfterWriteBack checks what the write-back's answers do to the
// choice: a raised node fences the token, a node that lost our lock (a
// restart) no longer counts as taken, and a node that failed to answer still
// counts as taken but does not fence it.
func TestChooseAfterWriteBack(t *testing.T) {
	t.Parallel()
	held := fmt.Errorf("held: %w", lock.ErrNotAcquired)
	lost := fmt.Errorf("raise: %w", lock.ErrNotHeld)
	timeout := errors.New("i/o timeout")
	tokens := []uint64{50, 10, 40, 20, 0} // token 40, fenced by nodes 0 and 2
	set := []error{nil, nil, nil, nil, held}
	for _, c := range []struct {
		name   string
		raised []error
		ok     bool
		token  uint64
		fenced int
	}{
		{"both raised", []error{errSkipped, nil, errSkipped, nil, errSkipped}, true, 40, 4},
		{"one raised", []error{errSkipped, nil, errSkipped, timeout, errSkipped}, true, 40, 3},
		{"one lost, the choice moves up", []error{errSkipped, lost, errSkipped, nil, errSkipped}, true, 50, 3},
		{"two lost, no quorum", []error{errSkipped, lost, errSkipped, lost, errSkipped}, false, 0, 0},
	} {
		a := attempt{quorum: 3, tokens: tokens, set: set, raised: c.raised}
		token, ok := a.choose()
		if ok != c.ok || token != c.token {
			t.Errorf("%s: choose = %d, %v; want %d, %v", c.name, token, ok, c.token, c.ok)
		}
		if got := a.fenced(40); got != c.fenced && ok {
			t.Errorf("%s: fenced(40) = %d, want %d", c.name, got, c.fenced)
		}
	}
}

// TestUnreachable checks when an attempt that took no lease names a failure
// instead of lock.ErrNotAcquired: more than N-Q nodes failed, in either
// round, while no quorum said another owner holds the key.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	held := fmt.Errorf("held: %w", lock.ErrNotAcquired)
	down := errors.New("connection refused")
	lost := fmt.Errorf("raise: %w", lock.ErrNotHeld)
	for _, c := range []struct {
		name        string
		quorum      int
		set, raised []error
		unreachable bool
	}{
		{"votes split", 3, []error{nil, nil, held, held, down}, nil, false},
		{"held on a quorum", 3, []error{held, held, held, down, down}, nil, false},
		{"three down", 3, []error{nil, held, down, down, down}, nil, true},
		{"two down, one lost in the write-back", 3, []error{nil, nil, nil, down, down}, []error{errSkipped, lost, errSkipped, errSkipped, errSkipped}, true},
		{"two down, one write-back timed out", 3, []error{nil, nil, nil, down, down}, []error{errSkipped, down, errSkipped, errSkipped, errSkipped}, true},
		{"two down, raised", 3, []error{nil, nil, nil, down, down}, []error{errSkipped, nil, nil, errSkipped, errSkipped}, false},
		{"quorum 4: two held, two down", 4, []error{nil, held, held, down, down}, nil, false},
	} {
		a := attempt{quorum: c.quorum, set: c.set, raised: c.raised}
		err := a.unreachable()
		if (err != nil) != c.unreachable {
			t.Errorf("%s: unreachable() = %v, want an error: %v", c.name, err, c.unreachable)
		}
		if err != nil && !errors.Is(err, down) && !errors.Is(err, lost) {
			t.Errorf("%s: unreachable() = %v, does not wrap a node's failure", c.name, err)
		}
	}
}

// TestOperator runs the operator's suite on five nodes: Inspect, List and
// Break by the quorum's view.
func TestOperator(t *testing.T) {
	c := startCluster(t)
	locktest.RunOperator(t, locktest.Harness{
		New: func(t *testing.T) lock.Locker {
			l, _ := c.lockerAndClients(t)
			return l
		},
	})
}
