package testsvc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Where Debian's zookeeper package puts the server and the SLF4J binding
// that gives it a log (without it the server logs nothing).
const (
	zkJar         = "/usr/share/java/zookeeper.jar"
	zkSLF4JSimple = "/usr/share/java/slf4j-simple.jar"
)

// zkStartTimeout bounds how long Start waits for `srvr` to report a Mode.
// A cold start serves after about 0.3 s, a restart after 0.7 s (SERVICES.md).
const zkStartTimeout = 30 * time.Second

// ZooKeeperServer is a ZooKeeper child process owned by one test, standalone
// (StartZooKeeper) or a member of a ZooKeeperEnsemble, for tests that stop,
// pause or restart the server. Its data directory lives
// in t.TempDir() and survives Stop, Start and Restart, so znodes, sessions and
// the zxid counter (and with it czxid fencing tokens) survive a restart. All
// methods are safe for concurrent use; Start and Restart report failures with
// t.Fatalf.
type ZooKeeperServer struct {
	*process
	port int
}

// ZooKeeperConfig is the configuration StartZooKeeper writes before the
// caller's extra lines: fast session expiry (sessions of 1-10 s, checked
// every 500 ms), no AdminServer on 8080, every four-letter word allowed.
const ZooKeeperConfig = `tickTime=500
minSessionTimeout=1000
maxSessionTimeout=10000
admin.enableServer=false
4lw.commands.whitelist=*
`

// StartZooKeeper starts a private standalone ZooKeeper (Debian's zookeeper
// package: java and /usr/share/java/zookeeper.jar) on a free port of
// 127.0.0.1 with its data directory in t.TempDir(), waits until the
// four-letter word `srvr` reports a Mode (ruok answers before the server
// serves), and stops it in t.Cleanup. The configuration is ZooKeeperConfig
// followed by extra, one setting per string ("maxSessionTimeout=40000"); a
// later line overrides an earlier one. It calls Unavailable when java or the
// jar is missing (apt-get install zookeeper). The log is zookeeper.log in the
// server's directory and is shown when it fails to start.
func StartZooKeeper(t testing.TB, extra ...string) *ZooKeeperServer {
	t.Helper()
	s := newZooKeeperServer(t, zkJava(t), "zookeeper")
	s.startOnFreePorts(5, func() { s.writeConfig(extra) }, &s.port)
	return s
}

// zkJava returns the java binary that runs ZooKeeper, after checking that
// the server's jar is installed; it calls Unavailable when either is missing.
func zkJava(t testing.TB) string {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		Unavailable(t, "testsvc: java not found on PATH (apt-get install zookeeper)")
	}
	if _, err := os.Stat(zkJar); err != nil {
		Unavailable(t, "testsvc: %s missing (apt-get install zookeeper)", zkJar)
	}
	return java
}

// newZooKeeperServer prepares a server in a new t.TempDir(), ready after
// srvr reports a Mode (standalone, leader or follower). The caller picks the
// ports and writes the configuration before the first start.
func newZooKeeperServer(t testing.TB, java, name string) *ZooKeeperServer {
	dir := t.TempDir()
	s := &ZooKeeperServer{}
	s.process = &process{
		t: t, name: name, dir: dir, log: filepath.Join(dir, "zookeeper.log"),
		timeout: zkStartTimeout,
		command: func() *exec.Cmd {
			cp := zkJar
			if _, err := os.Stat(zkSLF4JSimple); err == nil {
				cp += ":" + zkSLF4JSimple
			}
			return exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", cp,
				"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.configPath())
		},
		ready: func() bool {
			_, err := s.Mode()
			return err == nil
		},
	}
	return s
}

// writeConfig writes zoo.cfg: ZooKeeperConfig, the server's own directory
// and client port, then extra, one setting per string.
func (s *ZooKeeperServer) writeConfig(extra []string) {
	s.t.Helper()
	cfg := ZooKeeperConfig +
		"dataDir=" + s.dataDir() + "\n" +
		"clientPort=" + strconv.Itoa(s.port) + "\n" +
		"clientPortAddress=127.0.0.1\n" +
		strings.Join(extra, "\n") + "\n"
	if err := os.WriteFile(s.configPath(), []byte(cfg), 0o644); err != nil {
		s.t.Fatalf("testsvc: write zoo.cfg: %v", err)
	}
}

func (s *ZooKeeperServer) configPath() string { return filepath.Join(s.dir, "zoo.cfg") }

func (s *ZooKeeperServer) dataDir() string { return filepath.Join(s.dir, "data") }

// Mode returns the role the server reports in `srvr`: "standalone",
// "leader" or "follower". It fails while the server is down, paused, or not
// serving (say, an ensemble member during an election).
func (s *ZooKeeperServer) Mode() (string, error) {
	out, err := ZooKeeperFourLetter(s.Endpoint(), "srvr")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("testsvc: %s is not serving: %q", s.Endpoint(), strings.TrimSpace(out))
}

// Endpoint returns the client address, 127.0.0.1:PORT, as ZooKeeper clients
// take it. It stays the same across Stop, Start and Restart.
func (s *ZooKeeperServer) Endpoint() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// ZooKeeperFourLetter sends a four-letter word ("srvr", "ruok", "cons") to
// the server at addr and returns its whole answer. The word is sent without a
// trailing newline, which made some answers come back empty (SERVICES.md).
func ZooKeeperFourLetter(addr, word string) (string, error) {
	c, err := dialChecked(addr, checkTimeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := io.WriteString(c, word); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}
