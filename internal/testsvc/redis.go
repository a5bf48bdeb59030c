package testsvc

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// RedisServer is a redis-server child process owned by one test, for tests
// that stop, pause or restart the server. It keeps nothing on disk, so a
// restart brings it back empty. Pid, Stop, Start, Restart and Signal are safe
// for concurrent use; Start and Restart report failures with t.Fatalf.
type RedisServer struct {
	*process
	args []string
	port int
}

// redisStartTimeout bounds how long Start waits for PING.
const redisStartTimeout = 10 * time.Second

// StartRedis starts a private redis-server (as a child process, not
// daemonized) on a free port of 127.0.0.1 with
// --port P --bind 127.0.0.1 --save "" --appendonly no --dir <t.TempDir()>
// followed by args, waits until it answers PING, and stops it in t.Cleanup.
// It calls Unavailable when redis-server is not on PATH. The log is
// redis.log in the server's directory and is shown when it fails to start.
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "testsvc: redis-server not found on PATH (apt-get install redis-server)")
	}
	dir := t.TempDir()
	s := &RedisServer{args: args}
	s.process = &process{
		t: t, name: "redis-server", dir: dir, log: filepath.Join(dir, "redis.log"),
		timeout: redisStartTimeout,
		command: func() *exec.Cmd {
			argv := []string{
				"--port", strconv.Itoa(s.port),
				"--bind", "127.0.0.1",
				"--save", "",
				"--appendonly", "no",
				"--daemonize", "no",
				"--dir", dir,
			}
			return exec.Command(bin, append(argv, s.args...)...)
		},
		ready: func() bool {
			err := pingRedis(s.Addr(), 200*time.Millisecond)
			return err == nil || errors.Is(err, errRedisNeedsAuth) // up, with --requirepass
		},
	}
	s.startOnFreePorts(5, nil, &s.port)
	return s
}

// Addr returns the server's address, 127.0.0.1:PORT. It stays the same
// across Stop, Start and Restart.
func (s *RedisServer) Addr() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}
