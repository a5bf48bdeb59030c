package testsvc

import (
	"os"
	"syscall"
)

// childProcAttr makes a child server die with the test binary, so a test
// run killed by its timeout leaves no server behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// terminate asks p to exit: SIGTERM, then SIGCONT in case it was paused with
// SIGSTOP (the pending SIGTERM is delivered when it resumes).
func terminate(p *os.Process) {
	_ = p.Signal(syscall.SIGTERM)
	_ = p.Signal(syscall.SIGCONT)
}

// processAlive reports whether a process with this pid exists.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// continueProcess resumes pid in case a test paused it with SIGSTOP.
func continueProcess(pid int) {
	_ = syscall.Kill(pid, syscall.SIGCONT)
}
