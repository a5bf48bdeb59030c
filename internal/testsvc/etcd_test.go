package testsvc

import (
	"syscall"
	"testing"
	"time"
)

func TestEtcdServer(t *testing.T) {
	s := StartEtcd(t)
	if err := etcdDial(s.Endpoint()); err != nil {
		t.Fatalf("dial %s: %v", s.Endpoint(), err)
	}
	pid := s.Pid()
	if pid == 0 {
		t.Fatal("Pid() = 0 for a running server")
	}
	if err := s.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	checkRestartStopStart(t, s.process, func() error { return etcdDial(s.Endpoint()) })
}

// checkRestartStopStart checks a running server p: after Restart it runs
// under a new pid and answers (answers returns nil); after Stop it has no
// pid and takes no signal; after Start it answers again.
func checkRestartStopStart(t *testing.T, p *process, answers func() error) {
	t.Helper()
	pid := p.Pid()
	start := time.Now()
	p.Restart()
	t.Logf("Restart took %v", time.Since(start))
	if p.Pid() == pid || p.Pid() == 0 {
		t.Fatalf("Restart: pid %d, was %d", p.Pid(), pid)
	}
	if err := answers(); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	p.Stop()
	if p.Pid() != 0 {
		t.Fatal("server still running after Stop")
	}
	if err := p.Signal(syscall.SIGCONT); err == nil {
		t.Fatal("Signal on a stopped server succeeded")
	}
	p.Start()
	if err := answers(); err != nil {
		t.Fatalf("after Start: %v", err)
	}
}
