package testsvc

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// MySQLServer is a private MariaDB (or MySQL) server owned by one test, for
// tests that need a server set up otherwise than the shared one: today,
// one that takes connections over TLS only. It listens on 127.0.0.1 on a
// free port and has a database "test" that the user "app", without a
// password, may use from any host.
type MySQLServer struct {
	*process
	port int
}

// mysqlStartTimeout bounds a private MariaDB's start.
const mysqlStartTimeout = 30 * time.Second

// StartMySQLTLS starts a private MariaDB that requires TLS of every TCP
// client (require_secure_transport) and presents c's server certificate.
// Its data directory is made by mariadb-install-db (a few seconds); the
// server runs as root's child (--user=root) and is stopped by t.Cleanup. It
// calls Unavailable when the binaries are missing.
func StartMySQLTLS(t testing.TB, c *Certs) *MySQLServer {
	t.Helper()
	server, err1 := exec.LookPath("mariadbd")
	install, err2 := exec.LookPath("mariadb-install-db")
	client, err3 := exec.LookPath("mariadb")
	if err1 != nil || err2 != nil || err3 != nil {
		Unavailable(t, "testsvc: mariadbd, mariadb-install-db or mariadb not found (apt-get install mariadb-server mariadb-client)")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("testsvc: mariadb-install-db: %v: %s", err, out)
	}
	sock := filepath.Join(dir, "mysqld.sock")
	s := &MySQLServer{}
	s.process = &process{
		t: t, name: "mariadbd", dir: dir, log: filepath.Join(dir, "mariadbd.log"),
		timeout: mysqlStartTimeout,
		command: func() *exec.Cmd {
			return exec.Command(server, "--no-defaults", "--datadir="+data, "--user=root",
				"--port="+strconv.Itoa(s.port), "--bind-address=127.0.0.1", "--socket="+sock,
				"--pid-file="+filepath.Join(dir, "mariadbd.pid"), "--skip-log-bin",
				"--innodb-buffer-pool-size=16M", "--require-secure-transport=ON",
				"--ssl-ca="+c.CA, "--ssl-cert="+c.ServerCert, "--ssl-key="+c.ServerKey)
		},
		ready: func() bool {
			return exec.Command(client, "--no-defaults", "-S", sock, "-uroot", "-e", "SELECT 1").Run() == nil
		},
	}
	s.startOnFreePorts(3, nil, &s.port)
	setup := "CREATE DATABASE test; CREATE USER 'app'@'%'; GRANT ALL ON test.* TO 'app'@'%';"
	if out, err := exec.Command(client, "--no-defaults", "-S", sock, "-uroot", "-e", setup).CombinedOutput(); err != nil {
		t.Fatalf("testsvc: set up mariadbd: %v: %s", err, out)
	}
	return s
}

// Addr returns 127.0.0.1:PORT.
func (s *MySQLServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }
