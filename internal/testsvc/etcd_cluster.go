package testsvc

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EtcdCluster is an etcd cluster of child processes owned by one test, for
// tests that kill or restart single members (the leader, say) while the
// others keep a quorum.
type EtcdCluster struct {
	Members []*EtcdMember
}

// EtcdMember is one member of an EtcdCluster. Its data directory lives in
// t.TempDir() and survives Stop, Start and Restart, so a member started again
// rejoins the cluster with its old identity. The process methods (Stop,
// Start, Restart, Signal, Pid) are those of EtcdServer.
type EtcdMember struct {
	*process
	Name       string // the member name, "m0", "m1", ...
	clientPort int
	peerPort   int
}

// Endpoint returns the member's client address, 127.0.0.1:PORT. It stays the
// same across Stop, Start and Restart.
func (m *EtcdMember) Endpoint() string {
	return "127.0.0.1:" + strconv.Itoa(m.clientPort)
}

// StartEtcdCluster starts an n-member etcd cluster (Debian's etcd-server) on
// free client and peer ports of 127.0.0.1, waits until every member's /health
// answers, and kills all members (SIGKILL) in t.Cleanup. It calls Unavailable
// when etcd is not on PATH. Each member logs to etcd.log in its own directory;
// the log is shown when a member fails to start.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("testsvc: StartEtcdCluster(%d): need at least one member", n)
	}
	bin, err := exec.LookPath("etcd")
	if err != nil {
		Unavailable(t, "testsvc: etcd not found on PATH (apt-get install etcd-server etcd-client)")
	}
	c := &EtcdCluster{}
	var initial string // --initial-cluster, set before the first start
	token := "latchkey-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	for i := range n {
		dir := t.TempDir()
		m := &EtcdMember{Name: "m" + strconv.Itoa(i)}
		client := func() string { return "http://" + m.Endpoint() }
		m.process = &process{
			t: t, name: "etcd " + m.Name, dir: dir, log: filepath.Join(dir, "etcd.log"),
			timeout: etcdStartTimeout,
			command: func() *exec.Cmd {
				peer := "http://127.0.0.1:" + strconv.Itoa(m.peerPort)
				return exec.Command(bin,
					"--name", m.Name,
					"--data-dir", filepath.Join(dir, "data"),
					"--logger=zap",
					"--listen-client-urls", client(), "--advertise-client-urls", client(),
					"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
					"--initial-cluster", initial,
					"--initial-cluster-token", token,
					"--initial-cluster-state", "new",
				)
			},
			ready: func() bool { return etcdHealthy(hc, client()) },
		}
		c.Members = append(c.Members, m)
	}
	release := func() {
		for _, m := range c.Members {
			releasePort(m.clientPort)
			releasePort(m.peerPort)
		}
	}
	procs := make([]*process, n)
	for i, m := range c.Members {
		procs[i] = m.process
	}
	prepare := func() {
		var peers []string
		for _, m := range c.Members {
			m.clientPort, m.peerPort = FreePort(t), FreePort(t)
			reservePort(m.clientPort)
			reservePort(m.peerPort)
			peers = append(peers, m.Name+"=http://127.0.0.1:"+strconv.Itoa(m.peerPort))
		}
		initial = strings.Join(peers, ",")
	}
	label := func(i int) string { return "member " + c.Members[i].Name }
	startTogether(t, "etcd cluster", procs, label, prepare, release)
	return c
}

// Endpoints returns the client addresses of all members, running or not, in
// member order.
func (c *EtcdCluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// Leader returns the index in Members of the current leader, as the running
// members report it: it asks each one for its status (member id and leader
// id) and retries until a running member is the leader they name, or ctx
// ends.
func (c *EtcdCluster) Leader(ctx context.Context) (int, error) {
	var lastErr error
	for {
		i, err := c.leaderOnce(ctx)
		if err == nil {
			return i, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("testsvc: etcd leader: %w (last: %v)", ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *EtcdCluster) leaderOnce(ctx context.Context) (int, error) {
	var eps []string
	var idx []int
	for i, m := range c.Members {
		if m.Pid() != 0 {
			eps = append(eps, m.Endpoint())
			idx = append(idx, i)
		}
	}
	if len(eps) == 0 {
		return -1, fmt.Errorf("no member is running")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	var leader uint64
	ids := make(map[uint64]int)
	for k, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			return -1, fmt.Errorf("status of %s: %w", ep, err)
		}
		ids[st.Header.MemberId] = idx[k]
		if st.Leader == 0 {
			return -1, fmt.Errorf("%s knows no leader", ep)
		}
		if leader != 0 && st.Leader != leader {
			return -1, fmt.Errorf("members disagree on the leader: %x and %x", leader, st.Leader)
		}
		leader = st.Leader
	}
	i, ok := ids[leader]
	if !ok {
		return -1, fmt.Errorf("leader %x is not a running member", leader)
	}
	return i, nil
}
