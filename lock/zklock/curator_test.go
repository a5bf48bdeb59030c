package zklock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchkey-go/latchkey/internal/testsvc"
	"github.com/latchkey-go/latchkey/lock"
	"github.com/latchkey-go/latchkey/lock/zklock"
)

// Debian's libcurator-recipes-java (its manifest pulls in curator-framework,
// curator-client, guava and zookeeper) and libslf4j-java's silent binding.
const (
	curatorJar = "/usr/share/java/curator-recipes.jar"
	slf4jNop   = "/usr/share/java/slf4j-nop.jar"
)

// A curator is the testdata/CuratorLock.java program: Curator
// InterProcessMutex contenders on one path, driven line by line.
type curator struct{ *child }

// jvmFlags start a short-lived JVM quickly.
var jvmFlags = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto"}

// compileCurator checks for the JDK and Curator (missing ones fail the test
// in CI and skip it elsewhere) and compiles CuratorLock.java into a temp dir
// in the background; the function it returns waits for javac and returns
// the java binary and the class directory.
func compileCurator(t *testing.T) func() (java, classes string) {
	t.Helper()
	javac, err := exec.LookPath("javac")
	if err != nil {
		testsvc.Unavailable(t, "javac not on PATH (apt-get install openjdk-17-jdk-headless)")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		testsvc.Unavailable(t, "java not on PATH (apt-get install openjdk-17-jdk-headless)")
	}
	for _, jar := range []string{curatorJar, slf4jNop} {
		if _, err := os.Stat(jar); err != nil {
			testsvc.Unavailable(t, "%s missing (apt-get install libcurator-recipes-java libslf4j-java)", jar)
		}
	}
	classes := t.TempDir()
	var args []string
	for _, f := range jvmFlags {
		args = append(args, "-J"+f)
	}
	args = append(args, "-nowarn", "-cp", curatorJar, "-d", classes,
		filepath.Join("testdata", "CuratorLock.java"), filepath.Join("testdata", "CuratorLeader.java"))
	var out []byte
	done := make(chan struct{}) // closed when javac has exited; then out and err are set
	start := time.Now()
	go func() {
		defer close(done)
		out, err = exec.Command(javac, args...).CombinedOutput()
	}()
	t.Cleanup(func() { <-done }) // before the temp dir is removed
	return func() (string, string) {
		t.Helper()
		<-done
		if err != nil {
			t.Fatalf("javac CuratorLock.java: %v\n%s", err, out)
		}
		t.Logf("javac took %v", time.Since(start).Round(time.Millisecond))
		return java, classes
	}
}

// startCurator runs the compiled CuratorLock on path and waits until it is
// connected. It is stopped (its session closed) in t.Cleanup.
func startCurator(t *testing.T, java, classes, hosts, path string) *curator {
	t.Helper()
	return startCuratorMain(t, java, classes, "CuratorLock", hosts, path)
}

// startCuratorMain runs the compiled class main with args and waits until
// it says "ready". It is stopped (its session closed) in t.Cleanup.
func startCuratorMain(t *testing.T, java, classes, main string, args ...string) *curator {
	t.Helper()
	start := time.Now()
	jargs := append(slices.Clone(jvmFlags), "-Xmx128m", "-cp", classes+":"+curatorJar+":"+slf4jNop, main)
	jargs = append(jargs, args...)
	c := &curator{startChild(t, "Curator", exec.Command(java, jargs...), 5*time.Second)}
	c.expect("ready")
	t.Logf("Curator connected %v after its start", time.Since(start).Round(time.Millisecond))
	return c
}

// expect reads Curator's next line and fails unless it starts with the
// given fields; it returns all fields.
func (c *curator) expect(want ...string) []string {
	c.t.Helper()
	line := c.next(strings.Join(want, " "), 30*time.Second)
	f := strings.Fields(line)
	if len(f) < len(want) || !slices.Equal(f[:len(want)], want) {
		c.t.Fatalf("Curator said %q, want %q; stderr:\n%s", line, strings.Join(want, " "), readFile(c.stderr))
	}
	return f
}

// held parses "held ID NODE CZXID" and checks the node has Curator's name.
func (c *curator) held(id string) (node string, czxid uint64) {
	c.t.Helper()
	f := c.expect("held", id)
	if len(f) != 4 || !curatorName.MatchString(f[2]) {
		c.t.Fatalf("Curator's held line %q: want held %s _c_<uuid>-lock-<seq> <czxid>", strings.Join(f, " "), id)
	}
	n, err := strconv.ParseUint(f[3], 10, 64)
	if err != nil {
		c.t.Fatal(err)
	}
	return f[2], n
}

// curatorName is the protected name of an InterProcessMutex node, which our
// default CuratorNames nodes share.
var curatorName = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-lock-[0-9]{10}$`)

type acquired struct {
	lease *lock.Lease
	err   error
}

// acquireAsync runs a waiting Acquire in the background.
func acquireAsync(ctx context.Context, l lock.Locker, key string) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		lease, err := l.Acquire(ctx, key, lock.WithWait(30*time.Second))
		ch <- acquired{lease, err}
	}()
	return ch
}

// notYet fails if the Acquire behind ch has returned.
func notYet(t *testing.T, ch <-chan acquired, who string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned while another contender held the lock: %v, %v", who, r.lease != nil, r.err)
	default:
	}
}

// got waits for the Acquire behind ch and returns its lease.
func got(t *testing.T, ch <-chan acquired, who string) *lock.Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", who, r.err)
		}
		return r.lease
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not get the lock within 30 s", who)
		return nil
	}
}

// newChild waits until a child not in known appears under dir, adds it to
// known and returns its name: the node a contender just queued.
func newChild(t *testing.T, c *zk.Conn, dir string, known map[string]bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		children, _, err := c.Children(dir)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("children of %s: %v", dir, err)
		}
		for _, ch := range children {
			if !known[ch] {
				known[ch] = true
				return ch
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no new contender under %s within 30 s", dir)
	return ""
}

// TestCuratorInterop shares one lock path between our Lockers and Apache
// Curator's InterProcessMutex (Debian's Curator 5.4.0, in a JVM): each
// excludes the other, a waiter of either kind gets the lock right after the
// other releases, and when both kinds queue, both serve the queue in
// ZooKeeper's sequence order, which Curator also reports as its own order.
// Tokens (czxids) increase across both kinds of holder.
func TestCuratorInterop(t *testing.T) {
	compiled := compileCurator(t)
	srv := startZK(t)
	const dir = "/curator/shared"
	java, classes := compiled()
	cur := startCurator(t, java, classes, srv.Endpoint(), dir)
	ctx := t.Context()
	a := newLocker(t, srv, zklock.WithPrefix("/curator"))
	b := newLocker(t, srv, zklock.WithPrefix("/curator"))
	admin := plainConn(t, srv)
	known := map[string]bool{}
	var tokens []uint64

	// Curator holds: our try fails, our waiter queues behind Curator's node
	// and gets the lock once Curator releases.
	cur.send("acquire c1")
	c1, tok := cur.held("c1")
	known[c1] = true
	tokens = append(tokens, tok)
	if _, err := a.Acquire(ctx, "shared", lock.WithWait(0)); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("our try while Curator holds: %v, want ErrNotAcquired", err)
	}
	wa := acquireAsync(ctx, a, "shared")
	na := newChild(t, admin, dir, known)
	if !curatorName.MatchString(na) {
		t.Fatalf("our node %q does not have Curator's name form", na)
	}
	cur.send("nodes")
	if f := cur.expect("nodes"); !slices.Equal(f[1:], []string{c1, na}) {
		t.Fatalf("Curator's order %q, want [%s %s]", f[1:], c1, na)
	}
	time.Sleep(200 * time.Millisecond)
	notYet(t, wa, "our waiter")
	cur.send("release c1")
	cur.expect("released", "c1")
	released := time.Now()
	la := got(t, wa, "our waiter")
	t.Logf("our waiter got the lock %v after Curator said it released", time.Since(released).Round(time.Microsecond))
	tokens = append(tokens, la.Token())

	// We hold: Curator's try fails, its acquire queues and gets the lock
	// once we release.
	cur.send("try c1 300")
	cur.expect("busy", "c1")
	cur.send("acquire c1")
	c1 = newChild(t, admin, dir, known)
	cur.quiet(300*time.Millisecond, "while our lease was held")
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released = time.Now()
	if node, tok := cur.held("c1"); node != c1 {
		t.Fatalf("Curator holds with %s, queued %s", node, c1)
	} else {
		tokens = append(tokens, tok)
	}
	t.Logf("Curator said it held %v after our Release returned", time.Since(released).Round(time.Microsecond))

	// Both kinds queue behind Curator's c1: ours (a), Curator's c2, ours
	// (b). Each must get the lock in that order, from the one before it.
	wa = acquireAsync(ctx, a, "shared")
	na = newChild(t, admin, dir, known)
	cur.send("acquire c2")
	c2 := newChild(t, admin, dir, known)
	wb := acquireAsync(ctx, b, "shared")
	nb := newChild(t, admin, dir, known)
	cur.send("nodes")
	if f := cur.expect("nodes"); !slices.Equal(f[1:], []string{c1, na, c2, nb}) {
		t.Fatalf("Curator's order %q, want [%s %s %s %s]", f[1:], c1, na, c2, nb)
	}

	cur.send("release c1")
	cur.expect("released", "c1")
	la = got(t, wa, "our first waiter")
	tokens = append(tokens, la.Token())
	cur.quiet(300*time.Millisecond, "(c2 held) while our first waiter held the lock")
	notYet(t, wb, "our second waiter")

	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if node, tok := cur.held("c2"); node != c2 {
		t.Fatalf("Curator holds with %s, queued %s", node, c2)
	} else {
		tokens = append(tokens, tok)
	}
	time.Sleep(300 * time.Millisecond)
	notYet(t, wb, "our second waiter")

	cur.send("release c2")
	cur.expect("released", "c2")
	lb := got(t, wb, "our second waiter")
	tokens = append(tokens, lb.Token())
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}

	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens of successive holders (Curator, ours, Curator, ours, Curator, ours) not increasing: %v", tokens)
		}
	}
	t.Logf("tokens of successive holders: %v", tokens)
}

// TestOperatorSeesCuratorHolder inspects a lock Apache Curator holds: the
// holder is Curator's node, with its czxid as the token, and a break deletes
// it, so our waiter gets in with a higher token while Curator still thinks
// it holds the lock (Curator itself learns nothing: its InterProcessMutex has
// no lost-lock notice, which is why its users fence writes).
func TestOperatorSeesCuratorHolder(t *testing.T) {
	compiled := compileCurator(t)
	srv := startZK(t)
	const dir = "/curator/ops"
	java, classes := compiled()
	cur := startCurator(t, java, classes, srv.Endpoint(), dir)
	ctx := t.Context()
	ours := newLocker(t, srv, zklock.WithPrefix("/curator"))

	cur.send("acquire c1")
	node, czxid := cur.held("c1")
	info, err := lock.Inspect(ctx, ours, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Entry != dir+"/"+node || info.Token != czxid || info.Waiters != 0 {
		t.Fatalf("Inspect while Curator holds %s (czxid %d) = %+v", node, czxid, info)
	}
	page, err := lock.List(ctx, ours, "op", 10, "")
	if err != nil || len(page.Locks) != 1 || page.Locks[0].Entry != info.Entry {
		t.Fatalf("List = %+v, %v; want Curator's lock", page, err)
	}

	w := acquireAsync(ctx, ours, "ops")
	deadline := time.Now().Add(30 * time.Second)
	for info.Waiters != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if info, err = lock.Inspect(ctx, ours, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	if info.Waiters != 1 {
		t.Fatalf("Inspect with our waiter queued behind Curator = %+v, want 1 waiter", info)
	}
	notYet(t, w, "our waiter")
	broken, err := lock.Break(ctx, ours, "ops", "test", nil)
	if err != nil || broken.Entry != dir+"/"+node {
		t.Fatalf("Break = %+v, %v; want Curator's node broken", broken, err)
	}
	lease := got(t, w, "our waiter after the break")
	defer lease.Release(ctx)
	if lease.Token() <= czxid {
		t.Fatalf("token after the break %d, not above Curator's %d", lease.Token(), czxid)
	}
}
