package testsvc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ZooKeeperEnsemble is a replicated ZooKeeper ensemble of child processes
// owned by one test, for tests that kill or restart single servers (the
// leader, say) while the others keep a quorum. Each server's data directory
// (with its myid) survives Stop, Start and Restart, so a server started again
// rejoins the ensemble as itself.
type ZooKeeperEnsemble struct {
	// Servers are the members in id order: Servers[i] has myid i+1.
	Servers []*ZooKeeperServer

	// links[i][j] are the proxies server i reaches server j's quorum and
	// election ports through (StartZooKeeperEnsembleLinked), else nil.
	links [][][2]*Proxy
}

// zkEnsembleLimits are the ticks (500 ms each) a follower has to connect to
// and sync with a leader (initLimit) and to stay in step with it (syncLimit).
const zkEnsembleLimits = "initLimit=20\nsyncLimit=4\n"

// StartZooKeeperEnsemble starts an n-server ZooKeeper ensemble (Debian's
// zookeeper package) on free client, quorum and election ports of 127.0.0.1,
// waits until every server serves as leader or follower, and kills all
// servers (SIGKILL) in t.Cleanup. Each server's configuration is
// ZooKeeperConfig, the ensemble's lines, then extra, one setting per string,
// as for StartZooKeeper. It calls Unavailable when java or the jar is
// missing. Each server logs to zookeeper.log in its own directory; the log is
// shown when a server fails to start.
func StartZooKeeperEnsemble(t testing.TB, n int, extra ...string) *ZooKeeperEnsemble {
	t.Helper()
	return startZooKeeperEnsemble(t, n, false, extra)
}

// StartZooKeeperEnsembleLinked is StartZooKeeperEnsemble with every link
// between two servers (quorum and election, each direction) through a Proxy
// of its own, so that Partition can cut the ensemble in two: each server's
// zoo.cfg names the others at their proxies' addresses.
func StartZooKeeperEnsembleLinked(t testing.TB, n int, extra ...string) *ZooKeeperEnsemble {
	t.Helper()
	return startZooKeeperEnsemble(t, n, true, extra)
}

// Partition cuts the links between the servers of side (indexes in Servers)
// and the others, both ways, as a partition that drops frames silently
// does: the connections stay open and carry nothing (Proxy.Blackhole), so
// each side learns of the cut only by its own timeouts. Clients' links to
// the servers are not touched. Heal ends it. It needs
// StartZooKeeperEnsembleLinked.
func (e *ZooKeeperEnsemble) Partition(side ...int) { e.blackhole(side, true) }

// Heal ends a Partition: the links carry frames again (what was dropped
// stays lost, so the servers reconnect as they would after a real one).
func (e *ZooKeeperEnsemble) Heal() { e.blackhole(nil, false) }

func (e *ZooKeeperEnsemble) blackhole(side []int, on bool) {
	if e.links == nil {
		panic("testsvc: Partition needs StartZooKeeperEnsembleLinked")
	}
	in := map[int]bool{}
	for _, i := range side {
		in[i] = true
	}
	for i := range e.links {
		for j, pair := range e.links[i] {
			if i == j {
				continue
			}
			cut := on && in[i] != in[j]
			pair[0].Blackhole(cut)
			pair[1].Blackhole(cut)
		}
	}
}

func startZooKeeperEnsemble(t testing.TB, n int, linked bool, extra []string) *ZooKeeperEnsemble {
	t.Helper()
	if n < 1 {
		t.Fatalf("testsvc: StartZooKeeperEnsemble(%d): need at least one server", n)
	}
	java := zkJava(t)
	st := &ensembleStart{t: t, e: &ZooKeeperEnsemble{}, linked: linked, extra: extra, quorum: make([]int, 2*n)}
	for i := range n {
		st.e.Servers = append(st.e.Servers, newZooKeeperServer(t, java, "zookeeper "+strconv.Itoa(i+1)))
	}
	procs := make([]*process, n)
	for i, s := range st.e.Servers {
		procs[i] = s.process
	}
	label := func(i int) string { return "server " + strconv.Itoa(i+1) }
	startTogether(t, "zookeeper ensemble", procs, label, st.prepare, st.release)
	return st.e
}

// ensembleStart is an ensemble's start: the ports each attempt picks and
// the configuration it writes.
type ensembleStart struct {
	t      testing.TB
	e      *ZooKeeperEnsemble
	linked bool
	extra  []string
	quorum []int // quorum and election port of each server
}

// prepare picks free ports for every server, proxies between them if
// linked, and writes each server's myid and configuration.
func (st *ensembleStart) prepare() {
	for i, s := range st.e.Servers {
		s.port = FreePort(st.t)
		reservePort(s.port)
		for k := 2 * i; k < 2*i+2; k++ {
			st.quorum[k] = FreePort(st.t)
			reservePort(st.quorum[k])
		}
	}
	if st.linked {
		st.link()
	}
	for i, s := range st.e.Servers {
		if err := os.MkdirAll(s.dataDir(), 0o755); err != nil {
			st.t.Fatalf("testsvc: %v", err)
		}
		if err := os.WriteFile(filepath.Join(s.dataDir(), "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
			st.t.Fatalf("testsvc: write myid: %v", err)
		}
		s.writeConfig(append([]string{st.members(i)}, st.extra...))
	}
}

// link puts a proxy of its own on every link between two servers: server
// i reaches server j's quorum and election ports through links[i][j].
func (st *ensembleStart) link() {
	n := len(st.e.Servers)
	st.e.links = make([][][2]*Proxy, n)
	for i := range n {
		st.e.links[i] = make([][2]*Proxy, n)
		for j := range n {
			if i != j {
				st.e.links[i][j] = [2]*Proxy{
					NewProxy(st.t, "127.0.0.1:"+strconv.Itoa(st.quorum[2*j])),
					NewProxy(st.t, "127.0.0.1:"+strconv.Itoa(st.quorum[2*j+1])),
				}
			}
		}
	}
}

// members returns server i's view of the ensemble: itself at its own
// ports, the others at theirs or at i's proxies to them.
func (st *ensembleStart) members(i int) string {
	var lines strings.Builder
	lines.WriteString(zkEnsembleLimits)
	for j := range st.e.Servers {
		q, el := "127.0.0.1:"+strconv.Itoa(st.quorum[2*j]), "127.0.0.1:"+strconv.Itoa(st.quorum[2*j+1])
		if st.linked && i != j {
			q, el = st.e.links[i][j][0].Addr(), st.e.links[i][j][1].Addr()
		}
		fmt.Fprintf(&lines, "server.%d=%s:%s\n", j+1, q, strings.TrimPrefix(el, "127.0.0.1:"))
	}
	return lines.String()
}

// release gives back the ports of the last attempt.
func (st *ensembleStart) release() {
	for i, s := range st.e.Servers {
		releasePort(s.port)
		releasePort(st.quorum[2*i])
		releasePort(st.quorum[2*i+1])
	}
}

// Endpoints returns the client addresses of all servers, running or not, in
// id order.
func (e *ZooKeeperEnsemble) Endpoints() []string {
	eps := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		eps[i] = s.Endpoint()
	}
	return eps
}

// Leader returns the index in Servers of the server that reports itself
// leader, retrying (an election may be running) until one does or ctx ends.
func (e *ZooKeeperEnsemble) Leader(ctx context.Context) (int, error) {
	var lastErr error
	for {
		for i, s := range e.Servers {
			if s.Pid() == 0 {
				continue
			}
			mode, err := s.Mode()
			if err != nil {
				lastErr = err
				continue
			}
			if mode == "leader" {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("testsvc: zookeeper leader: %w (last: %v)", ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SessionServer returns the index in Servers of the running server the
// client with this session id is connected to, as its `cons` lists it, or
// -1 when no server lists it (the client is between servers).
func (e *ZooKeeperEnsemble) SessionServer(sessionID int64) int {
	sid := "sid=0x" + strconv.FormatUint(uint64(sessionID), 16) + ","
	for i, s := range e.Servers {
		if s.Pid() == 0 {
			continue
		}
		out, err := ZooKeeperFourLetter(s.Endpoint(), "cons")
		if err == nil && strings.Contains(out, sid) {
			return i
		}
	}
	return -1
}
