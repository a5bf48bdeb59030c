//go:build !linux

package testsvc

import (
	"os"
	"syscall"
)

// childProcAttr returns nil: only Linux can tie a child's life to ours.
func childProcAttr() *syscall.SysProcAttr { return nil }

// terminate asks p to exit (on Windows, kills it).
func terminate(p *os.Process) {
	if err := p.Signal(os.Interrupt); err != nil {
		p.Kill()
	}
}

// processAlive conservatively says yes: stale directories are only reaped on Linux.
func processAlive(pid int) bool { return true }

// continueProcess does nothing here.
func continueProcess(pid int) {}
