package testsvc

import (
	"syscall"
	"testing"
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
	s.Restart()
	if s.Pid() == pid || s.Pid() == 0 {
		t.Fatalf("Restart: pid %d, was %d", s.Pid(), pid)
	}
	if err := etcdDial(s.Endpoint()); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	s.Stop()
	if s.Pid() != 0 {
		t.Fatal("server still running after Stop")
	}
	if err := s.Signal(syscall.SIGCONT); err == nil {
		t.Fatal("Signal on a stopped server succeeded")
	}
	s.Start()
	if err := etcdDial(s.Endpoint()); err != nil {
		t.Fatalf("after Start: %v", err)
	}
}
