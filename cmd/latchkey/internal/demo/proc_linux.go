package demo

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child if the demo itself dies
// without cleaning up (SIGKILL, a crash), so no worker outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
