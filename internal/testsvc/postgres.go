package testsvc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// PostgresServer is a private, throwaway PostgreSQL cluster owned by one
// test, for tests that stop or restart the database. It listens on
// 127.0.0.1 on a free port, trusts every local connection, runs with
// fsync=off, and has only the default databases: connect to "postgres".
// Unlike RedisServer it keeps its data across Stop and Start. All methods are
// safe for concurrent use; Start and Restart report failures with t.Fatalf.
type PostgresServer struct {
	t       testing.TB
	binDir  string
	asOther bool // run the PostgreSQL programs as the postgres user (we are root)
	dir     string
	data    string
	logFile string
	port    int
	opts    string // more of postgres's -c settings, for StartPostgresTLS

	mu sync.Mutex
}

// pgStartTimeout bounds pg_ctl -w start and stop.
const pgStartTimeout = 60

// StartPostgres creates and starts a private PostgreSQL cluster, using the
// highest version installed under /usr/lib/postgresql/*/bin. Its directory
// is made with os.MkdirTemp and, when the test runs as root, owned by the
// postgres user, because initdb and pg_ctl refuse to run as root: they are
// run through `runuser -u postgres --`. The cluster is initialized like
// `initdb -U postgres --auth=trust -E UTF8 --locale=C.UTF-8` and started
// with `pg_ctl -w -o "-c listen_addresses=127.0.0.1 -p PORT -k DIR -c fsync=off"`.
// t.Cleanup stops it and removes its directory. It calls Unavailable when the
// binaries (or, as root, the postgres user or runuser) are missing.
//
// initdb runs once per machine and version: the result is kept as a
// template in the temp directory (latchkey-pg-template-*) and copied for each
// cluster, which takes a tenth of the time. Directories left by test
// processes that died without cleaning up are removed, and their servers
// stopped, by the next StartPostgres.
func StartPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	return startPostgres(t, nil)
}

// StartPostgresTLS is StartPostgres for a server that takes TCP connections
// over TLS only (hostssl in pg_hba.conf), with c's server certificate:
// connect with sslmode=verify-full&sslrootcert=c.CA.
func StartPostgresTLS(t testing.TB, c *Certs) *PostgresServer {
	t.Helper()
	return startPostgres(t, func(s *PostgresServer, owner *user.User) error {
		// postgres refuses a key others can read, and must own it.
		var files []string
		for _, f := range []string{c.ServerCert, c.ServerKey} {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			dst := filepath.Join(s.dir, filepath.Base(f))
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				return err
			}
			if err := chownTo(dst, owner); err != nil {
				return err
			}
			files = append(files, dst)
		}
		hba := filepath.Join(s.data, "pg_hba.conf")
		if err := os.WriteFile(hba, []byte("local all all trust\nhostssl all all 127.0.0.1/32 trust\n"), 0o600); err != nil {
			return err
		}
		s.opts = fmt.Sprintf(" -c ssl=on -c ssl_cert_file=%s -c ssl_key_file=%s", files[0], files[1])
		return chownTo(hba, owner)
	})
}

// startPostgres starts a private cluster, after prepare (when not nil) has
// changed its data directory or settings.
func startPostgres(t testing.TB, prepare func(*PostgresServer, *user.User) error) *PostgresServer {
	t.Helper()
	binDir, err := postgresBinDir()
	if err != nil {
		Unavailable(t, "testsvc: %v", err)
	}
	s := &PostgresServer{t: t, binDir: binDir}
	var owner *user.User
	if os.Geteuid() == 0 {
		s.asOther = true
		if owner, err = user.Lookup("postgres"); err != nil {
			Unavailable(t, "testsvc: running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			Unavailable(t, "testsvc: running as root and runuser is missing: %v", err)
		}
	}
	reapOnce.Do(func() { reapStalePostgres(binDir, s.asOther) })

	base := pgTempBase()
	s.dir, err = os.MkdirTemp(base, "latchkey-pg-srv-")
	if err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		_ = s.stopLocked("immediate")
		os.RemoveAll(s.dir)
		releasePort(s.port)
	})
	// The owner file lets a later process tell this directory is abandoned.
	if err := os.WriteFile(filepath.Join(s.dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	if err := chownTo(s.dir, owner); err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	s.data = filepath.Join(s.dir, "data")
	s.logFile = filepath.Join(s.dir, "postgres.log")

	if err := s.initData(base, owner); err != nil {
		t.Fatalf("testsvc: %v", err)
	}
	if prepare != nil {
		if err := prepare(s, owner); err != nil {
			t.Fatalf("testsvc: prepare postgres: %v", err)
		}
	}

	var lastErr error
	for range 3 {
		s.port = FreePort(t)
		reservePort(s.port)
		s.mu.Lock()
		lastErr = s.startLocked()
		s.mu.Unlock()
		if lastErr == nil {
			return s
		}
		releasePort(s.port)
		if !strings.Contains(lastErr.Error(), "could not bind") && !strings.Contains(lastErr.Error(), "in use") {
			break
		}
	}
	t.Fatalf("testsvc: start postgres: %v", lastErr)
	return nil
}

// URL returns the connection URL,
// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable. It stays the
// same across Stop, Start and Restart.
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Port returns the TCP port the server listens on.
func (s *PostgresServer) Port() int { return s.port }

// Pid returns the process id of the postmaster, or 0 when it is not running.
// Send it SIGSTOP and SIGCONT to pause the whole server.
func (s *PostgresServer) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pidLocked()
}

// Stop shuts the server down with `pg_ctl -m fast stop` and waits until it has
// exited. Stopping a stopped server does nothing.
func (s *PostgresServer) Stop() {
	s.t.Helper()
	s.halt("fast", "stop")
}

// Crash stops the server as a crash of it would (`pg_ctl -m immediate
// stop`: no checkpoint, and log records still in the server's memory are
// lost) and waits until it has exited. Start recovers from the log.
func (s *PostgresServer) Crash() {
	s.t.Helper()
	s.halt("immediate", "crash")
}

// halt stops the server with pg_ctl's shutdown mode, failing the test with
// what in its message if it cannot.
func (s *PostgresServer) halt(mode, what string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopLocked(mode); err != nil {
		s.t.Fatalf("testsvc: %s postgres: %v", what, err)
	}
}

// Start starts the server again on the same port with the same data and waits
// until it accepts connections. Starting a running server does nothing.
func (s *PostgresServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pidLocked() != 0 {
		return
	}
	var err error
	for i := range 10 {
		if err = s.startLocked(); err == nil {
			return
		}
		time.Sleep(time.Duration(i+1) * 50 * time.Millisecond)
	}
	s.t.Fatalf("testsvc: restart postgres on port %d: %v", s.port, err)
}

// Restart stops the server (fast) and starts it again on the same port; the
// data survives and every client connection is broken.
func (s *PostgresServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
}

func (s *PostgresServer) pidLocked() int { return postmasterPid(s.data) }

// postmasterPid returns the pid in data/postmaster.pid when that process is
// alive and, where /proc can tell, is the postmaster of data (not a process
// that reused the pid of a crashed one); 0 otherwise.
func postmasterPid(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 || !processAlive(pid) {
		return 0
	}
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && !strings.Contains(string(cmdline), data) {
		return 0
	}
	return pid
}

func (s *PostgresServer) startLocked() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off", s.port, s.dir) + s.opts
	out, err := s.pgCommand("pg_ctl", "-D", s.data, "-l", s.logFile, "-w", "-t", strconv.Itoa(pgStartTimeout), "-o", opts, "start")
	if err != nil {
		// pg_ctl may have left a half-started server behind.
		_ = s.stopLocked("immediate")
		return fmt.Errorf("pg_ctl start: %v: %s\nlog:\n%s", err, out, tail(s.logFile, 2000))
	}
	return nil
}

func (s *PostgresServer) stopLocked(mode string) error {
	pid := s.pidLocked()
	if pid == 0 {
		return nil
	}
	continueProcess(pid)
	out, err := s.pgCommand("pg_ctl", "-D", s.data, "-m", mode, "-w", "-t", strconv.Itoa(pgStartTimeout), "stop")
	if err != nil && s.pidLocked() != 0 {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// pgCommand runs a PostgreSQL program from binDir, as the postgres user when
// we are root, and returns its combined output.
func (s *PostgresServer) pgCommand(name string, args ...string) ([]byte, error) {
	return runPG(s.binDir, s.asOther, s.dir, name, args...)
}

func runPG(binDir string, asOther bool, dir, name string, args ...string) ([]byte, error) {
	prog := filepath.Join(binDir, name)
	var cmd *exec.Cmd
	if asOther {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
	} else {
		cmd = exec.Command(prog, args...)
	}
	cmd.Dir = dir // the test's working directory may be closed to postgres
	cmd.Env = pgEnv()
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// pgEnv is the environment without the PG* variables that could redirect
// the PostgreSQL programs to another cluster.
func pgEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C.UTF-8")
}

// initData fills s.data with a fresh cluster, copied from the machine's
// template (made on first use), or by initdb when that fails.
func (s *PostgresServer) initData(base string, owner *user.User) error {
	tmpl, terr := postgresTemplate(s.binDir, s.asOther, base, owner)
	if terr == nil {
		out, err := exec.Command("cp", "-a", tmpl, s.data).CombinedOutput()
		if err == nil {
			return nil
		}
		terr = fmt.Errorf("copy template: %v: %s", err, out)
		os.RemoveAll(s.data)
	}
	if out, err := s.pgCommand("initdb", initdbArgs(s.data)...); err != nil {
		return fmt.Errorf("initdb: %v: %s (template: %v)", err, out, terr)
	}
	return nil
}

func initdbArgs(data string) []string {
	return []string{"-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"}
}

// templateMu serializes template creation within the process; across
// processes, the atomic rename decides.
var templateMu sync.Mutex

// postgresTemplate returns the data directory of the template cluster for
// binDir, running initdb to make it when it does not exist yet.
func postgresTemplate(binDir string, asOther bool, base string, owner *user.User) (string, error) {
	templateMu.Lock()
	defer templateMu.Unlock()
	// One template per version and initdb flags.
	key := strings.NewReplacer("/", "_", ".", "_").Replace(filepath.Base(filepath.Dir(binDir)))
	final := filepath.Join(base, fmt.Sprintf("latchkey-pg-template-%s-v1", key))
	data := filepath.Join(final, "data")
	if _, err := os.Stat(filepath.Join(data, "global", "pg_control")); err == nil {
		return data, nil
	}
	tmp, err := os.MkdirTemp(base, "latchkey-pg-tmpl-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // gone after a successful rename
	if err := chownTo(tmp, owner); err != nil {
		return "", err
	}
	if out, err := runPG(binDir, asOther, tmp, "initdb", initdbArgs(filepath.Join(tmp, "data"))...); err != nil {
		return "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	if err := os.Rename(tmp, final); err != nil {
		// Another process may have won the race.
		if _, serr := os.Stat(filepath.Join(data, "global", "pg_control")); serr == nil {
			return data, nil
		}
		return "", err
	}
	return data, nil
}

// postgresBinDir finds the bin directory of the highest PostgreSQL version
// under /usr/lib/postgresql that has initdb, pg_ctl and postgres.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	type cand struct {
		dir string
		ver []int
	}
	var cands []cand
	for _, d := range dirs {
		ok := true
		for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
			if _, err := os.Stat(filepath.Join(d, p)); err != nil {
				ok = false
			}
		}
		if !ok {
			continue
		}
		var ver []int
		for _, f := range strings.Split(filepath.Base(filepath.Dir(d)), ".") {
			n, _ := strconv.Atoi(f)
			ver = append(ver, n)
		}
		cands = append(cands, cand{d, ver})
	}
	if len(cands) == 0 {
		return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl, postgres) under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i].ver, cands[j].ver
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] > b[k]
			}
		}
		return len(a) > len(b)
	})
	return cands[0].dir, nil
}

// pgTempBase is the parent of the clusters' directories. It must be
// traversable by the postgres user, which t.TempDir() is not, and short
// enough for the Unix socket path.
func pgTempBase() string {
	base := os.TempDir()
	if os.Geteuid() == 0 && !traversableByOthers(base) || len(base) > 40 {
		return "/tmp"
	}
	return base
}

func traversableByOthers(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

func chownTo(path string, u *user.User) error {
	if u == nil {
		return nil
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("bad uid/gid for %s: %q/%q", u.Username, u.Uid, u.Gid)
	}
	return os.Chown(path, uid, gid)
}

var reapOnce sync.Once

// reapStalePostgres stops the servers and removes the directories that test
// processes which have since died left behind (say, killed by go test's
// timeout before their cleanups ran), and half-made templates.
func reapStalePostgres(binDir string, asOther bool) {
	base := pgTempBase()
	srvs, _ := filepath.Glob(filepath.Join(base, "latchkey-pg-srv-*"))
	for _, d := range srvs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			// Just created by another process, or not ours: leave it unless old.
			if st, err := os.Stat(d); err != nil || time.Since(st.ModTime()) < time.Hour {
				continue
			}
		} else if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || processAlive(pid) {
			continue
		}
		if postmasterPid(filepath.Join(d, "data")) != 0 {
			_, _ = runPG(binDir, asOther, d, "pg_ctl", "-D", filepath.Join(d, "data"), "-m", "immediate", "-w", "stop")
		}
		os.RemoveAll(d)
	}
	tmps, _ := filepath.Glob(filepath.Join(base, "latchkey-pg-tmpl-*"))
	for _, d := range tmps {
		if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > 10*time.Minute {
			os.RemoveAll(d)
		}
	}
}
